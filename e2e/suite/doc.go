// Package suite is the end-to-end scenarios, written in Go. e2e/run.sh
// compiles it on the host (`go test -c -tags e2e`), and
// e2e/scenarios/guest.sh runs the binary inside the VM after its bash setup
// (topology, pods, Nodes, one `ipvsproxy run` per node), in the same boot.
// scenarios_test.go lists the scenarios in their default order, each named by
// the behaviour it checks. Each scenario is a t.Run that owns the Services it
// writes and deletes them with t.Cleanup; it reads the kernel through the
// project's own readers (the ipvs and ipset packages, opened in the node's
// network namespace) and writes Services and EndpointSlices through
// e2e/controlplane/cluster, the package e2ectl uses.
//
// Each step prints one verdict line, which guest.sh counts: `PASS name:
// what it checked`, or `FAIL name: what it checked: why` followed by the
// nodes' state; in test mode the commands a verdict ran follow it with their
// answers, and with E2E_DEMO=1 each command and its answer is printed as it
// runs (the seed tutorial's transcript). On the host the binary lists its
// verdicts (-list) and resolves a selection (-resolve) without the VM, and
// the tests of the table (TestScenarioTable*) run.
//
// It is a module of its own because it imports both the main module (its
// kernel readers) and e2e/controlplane (cluster). Either of those importing
// the other would change what that module builds from: e2e/controlplane's
// go.mod and go.sum are the cache key of its kube-apiserver and etcd build
// (any change is a cold rebuild of minutes on every machine), and the main
// module would take k8s.io/kubernetes' requirements into the graph the
// product resolves. This module's replace directives point at both, so
// neither changes. Only the e2e build tag compiles the scenarios: they run
// nowhere but in the VM.
package suite
