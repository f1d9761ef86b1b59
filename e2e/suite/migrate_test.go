//go:build e2e

package suite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ipvsproxy/ipvsproxy/e2e/controlplane/cluster"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The node-by-node migration of docs/migrate-from-kube-proxy.md, step by
// step: its command blocks are read from the guide and run (RunGuide,
// guide_test.go); kubectl's place is taken by the cluster package and
// deploy/test/apply.

// migratePort is migrate-node-by-node's node port.
const migratePort = 30043

// proxyLabel is the node label both proxies' DaemonSets select on.
const proxyLabel = "ipvsproxy.io/proxy"

// kubeProxyChains are the chains only kube-proxy's iptables mode makes.
var kubeProxyChains = regexp.MustCompile(`KUBE-(SVC|SEP|NODEPORTS|EXTERNAL-SERVICES|PROXY-FIREWALL|PROXY-CANARY)`)

// scenarioMigrate: ipvsproxy's DaemonSet (the migrate component) runs on
// the nodes labelled ipvsproxy.io/proxy=ipvsproxy, kube-proxy's (kubeadm's,
// patched) on every node not labelled ipvsproxy or rollback; relabelling
// node1 moves it from one to the other (no DaemonSet controller runs here:
// DaemonSetsFor says which DaemonSets would run a pod on the node, with the
// controller's own node affinity and taint checks). A node that joins
// mid-migration, unlabelled, is on kube-proxy, and every node is on exactly
// one proxy at each step. node1 carries kube-proxy's iptables-mode
// leftovers: between the proxies, its nat DNAT to an endpoint that is gone
// breaks the node's own connection to the cluster IP. The init container's
// command removes them (and nothing of ipvsproxy's), ipvsproxy starts and
// serves the cluster IP and the NodePort; the command again (a pod restart)
// changes nothing. (Once ipvsproxy has synced, most leftovers no longer act:
// it rewrites nat KUBE-SERVICES, its jumps come first, and IPVS rewrites a
// local connection's destination before filter OUTPUT; the clean-up is what
// removes them, which the counts check.) Rollback: the rollback pod's
// `ipvsproxy cleanup`, and node1 back on kube-proxy. The end: every node
// labelled, kube-proxy's DaemonSet deleted, ipvsproxy's affinity dropped,
// and a node that joins then is on ipvsproxy. The DaemonSets, the Nodes and
// their labels are as they were when the scenario ends.
func scenarioMigrate(s *S) {
	s.Step("migrate-node-by-node", "migration node by node: label moves node1 between the DaemonSets; a node joining mid-migration is on kube-proxy, every node on exactly one proxy; kube-proxy's leftovers (which break the node's connection between proxies) removed by the init container's command, cluster IP and NodePort served; a second run changes nothing; rollback cleans and hands back; at the end a joining node is on ipvsproxy", func(v *V) {
		v.Heading("node-by-node migration from kube-proxy: labels, a node joining, the init container's clean-up, rollback")
		svc := v.ApplyService(service("{name: migrate43}", "type: NodePort",
			fmt.Sprintf("ports: [{port: 80, targetPort: 8080, nodePort: %d, protocol: TCP}]", migratePort)))
		ip := svc.Spec.ClusterIP
		v.SetEndpoints(svc, "web@node1")
		v.WaitRealServers("node1", ipvs.TCP, node1Addr, migratePort, podIP("web")+":8080")
		nodePortURL := fmt.Sprintf("http://%s:%d/", node1Addr, migratePort)
		code := func(where, url, comment string) string {
			return v.Ask(where, "curl -s -o /dev/null -w '%{http_code}' --connect-timeout 2 --max-time 5 "+url+"  # "+comment).Out
		}

		// 1. kube-proxy keeps every node ipvsproxy does not take: no label is needed first.
		manifest, err := os.ReadFile(filepath.Join(guest.repo, "e2e/scenarios/testdata/kube-proxy-daemonset.yaml"))
		v.Must(err)
		ds, err := cluster.DecodeDaemonSet(manifest)
		v.Must(err)
		v.ApplyDaemonSet(ds)
		v.Show("-", "kubectl apply -f kube-proxy-daemonset.yaml  # kubeadm's, as e2ectl create-daemonset", "")
		for _, n := range []string{"node1", "node2"} {
			v.LabelNode(n, "kubernetes.io/os", "linux")
			v.LabelNode(n, proxyLabel, "") // as a cluster that never migrated has them
		}
		// The guide's steps 1 and 2, as written there.
		v.RunGuide("migrate-start", "node1")
		v.RunGuide("migrate-install", "node1")
		v.EachNodeOnOneProxy(map[string]string{"node1": "kube-proxy", "node2": "kube-proxy"})

		// node1 as kube-proxy left it: ipvsproxy not running, kube-proxy's rules in the kernel.
		v.StopProxier("node1", syscall.SIGTERM)
		v.installKubeProxyLeftovers("node1", ip)
		if refused := code("node1", "http://"+ip+"/", "between the proxies: kube-proxy's DNAT"); refused == "200" {
			v.Errorf("kube-proxy's leftover DNAT did not break the node's connection to the cluster IP")
		}

		// 2. Move node1 (the guide's step 3): the label, then what the DaemonSet's pod runs there.
		v.RunGuide("migrate-move", "node1")
		v.EachNodeOnOneProxy(map[string]string{"node1": "ipvsproxy", "node2": "kube-proxy"})

		// A node joins mid-migration (an autoscaler's): its kubelet registers it without the
		// label, and kube-proxy's DaemonSet takes it; moved, it is ipvsproxy's alone.
		v.JoinNode("node3")
		v.EachNodeOnOneProxy(map[string]string{"node1": "ipvsproxy", "node2": "kube-proxy", "node3": "kube-proxy"})
		v.RunGuide("migrate-move", "node3")
		v.EachNodeOnOneProxy(map[string]string{"node1": "ipvsproxy", "node2": "kube-proxy", "node3": "ipvsproxy"})
		cleaned := v.Ask("node1", "ipvsproxy cleanup --kube-proxy-leftovers  # the init container")
		if cleaned.Status != 0 {
			v.Errorf("cleanup --kube-proxy-leftovers failed: %s", oneline(cleaned.Out))
		}
		if !strings.Contains(cleaned.Out, "Removed kube-proxy's leftovers") || strings.Contains(cleaned.Out, "count=0") {
			v.Errorf("the init container removed nothing: %s", oneline(cleaned.Out))
		}
		left, err := kubeProxyRules("node1")
		v.Must(err)
		v.Show("node1", "iptables-save | grep -cE '"+kubeProxyChains.String()+"'  # read with the iptables package", strconv.Itoa(left))
		if left != 0 {
			v.Errorf("%d kube-proxy rules left", left)
		}
		v.StartProxier("node1", proxierRun{})
		waitUntil(30*time.Second, func() (bool, string) {
			a := run("client", "curl -s -o /dev/null -w '%{http_code}' --connect-timeout 2 --max-time 5 "+nodePortURL)
			return a.Out == "200", a.Out
		})
		if served := code("client", nodePortURL, "ipvsproxy on node1"); served != "200" {
			v.Errorf("NodePort %s under ipvsproxy, want 200", served)
		}
		if served := code("node1", "http://"+ip+"/", "the node's own connection"); served != "200" {
			v.Errorf("the node's connection to the cluster IP: %s, want 200", served)
		}
		v.RunGuide("migrate-check", "node1")

		// A restart of the pod runs the init container again, after the old container stopped (it
		// holds the node lock while it runs): nothing of ipvsproxy's goes.
		v.StopProxier("node1", syscall.SIGTERM)
		before, err := proxierState("node1")
		v.Must(err)
		again := v.Ask("node1", "ipvsproxy cleanup --kube-proxy-leftovers  # a restart's init container")
		after, err := proxierState("node1")
		v.Must(err)
		v.Show("node1", "ipvsadm -Ln; iptables-save; ip6tables-save; ipset list  # read with the ipvs, iptables and ipset packages, compared with before the second clean-up",
			fmt.Sprintf("IPVS same: %v, iptables same: %v, ipsets same: %v", before.ipvs == after.ipvs, before.rules == after.rules, before.sets == after.sets))
		if before.ipvs != after.ipvs {
			v.Errorf("the second clean-up changed IPVS: %s", lineChanges(before.ipvs, after.ipvs))
		}
		if before.rules != after.rules {
			v.Errorf("the second clean-up changed iptables: %s", lineChanges(before.rules, after.rules))
		}
		if before.sets != after.sets {
			v.Errorf("the second clean-up changed the ipsets: %s", lineChanges(before.sets, after.sets))
		}
		if !strings.Contains(again.Out, "count=0") {
			v.Errorf("the second clean-up removed something: %s", oneline(again.Out))
		}
		v.StartProxier("node1", proxierRun{})
		if still := code("client", nodePortURL, "after the second clean-up"); still != "200" {
			v.Errorf("NodePort %s after the second clean-up", still)
		}

		// 3. Rollback: off both DaemonSets, the rollback pod's command, back on kube-proxy.
		v.RunGuide("rollback-leave", "node1")
		if on := v.DaemonSetsFor("node1"); on != "" {
			v.Errorf("node1 on '%s' during rollback, want neither", on)
		}
		v.StopProxier("node1", syscall.SIGTERM)
		if a := v.Ask("node1", "ipvsproxy cleanup  # the rollback pod"); a.Status != 0 {
			v.Errorf("rollback cleanup failed: %s", oneline(a.Out))
		}
		l, err := leftovers("node1")
		v.Must(err)
		gone := fmt.Sprintf("%d %d %d %d", len(l.virtualServers), len(l.sets), l.kubeRules4, l.kubeRules6)
		v.Show("node1", "ipvsadm -Ln | grep -cE '^(TCP|UDP)'; ipset list -n | grep -c KUBE-; iptables-save | grep -c KUBE-; ip6tables-save | grep -c KUBE-  # read with the ipvs, ipset and iptables packages", gone)
		if gone != "0 0 0 0" {
			v.Errorf("after rollback's cleanup: virtual servers, KUBE- sets, KUBE- rules, KUBE- IPv6 rules = %s", gone)
		}
		v.RunGuide("rollback-return", "node1")
		v.EachNodeOnOneProxy(map[string]string{"node1": "kube-proxy", "node2": "kube-proxy", "node3": "ipvsproxy"})

		// 4. The end: every node moved, kube-proxy's DaemonSet gone, ipvsproxy's affinity
		// dropped (your kustomization without the migrate component); a node that joins
		// then is ipvsproxy's.
		for _, n := range []string{"node1", "node2"} {
			v.LabelNode(n, proxyLabel, "ipvsproxy")
		}
		v.Show("-", "kubectl label node --all "+proxyLabel+"=ipvsproxy --overwrite", "")
		v.EachNodeOnOneProxy(map[string]string{"node1": "ipvsproxy", "node2": "ipvsproxy", "node3": "ipvsproxy"})
		v.DeleteDaemonSet("kube-system", "kube-proxy")
		v.PatchDaemonSetWith("kube-system", "ipvsproxy", []byte(`{"spec":{"template":{"spec":{"affinity":null}}}}`),
			"kubectl apply -k deploy/overlays/kubeadm  # your kustomization, without the migrate component")
		v.JoinNode("node4")
		v.EachNodeOnOneProxy(map[string]string{"node1": "ipvsproxy", "node2": "ipvsproxy", "node3": "ipvsproxy", "node4": "ipvsproxy"})

		// Leave node1 as the other scenarios expect it.
		v.RestoreProxier("node1")
	})
}

// EachNodeOnOneProxy checks that each node is on the DaemonSet named, and
// on no other (DaemonSetsFor).
func (v *V) EachNodeOnOneProxy(want map[string]string) {
	nodes := make([]string, 0, len(want))
	for n := range want {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		if on := v.DaemonSetsFor(n); on != want[n] {
			v.Errorf("%s on '%s', want %s alone", n, on, want[n])
		}
	}
}

// JoinNode registers a Node as a kubelet does when it joins (its hostname
// and OS labels, no migration label), with addrs as its InternalIPs; it is
// deleted when the scenario ends. It is not Ready: no kubelet runs for it.
func (v *V) JoinNode(name string, addrs ...string) {
	ctx, cancel := v.s.ctx()
	defer cancel()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
	}}}
	for _, a := range addrs {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
	}
	created, err := guest.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	v.Must(err)
	if len(created.Status.Addresses) != len(addrs) {
		// The API server kept no status on create: written as the kubelet's status update is.
		created.Status.Addresses = n.Status.Addresses
		_, err = guest.client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		v.Must(err)
	}
	what := "kubernetes.io/os=linux, no " + proxyLabel
	if len(addrs) > 0 {
		what += ", InternalIP " + strings.Join(addrs, " ")
	}
	v.Show("-", "# a node joins: the kubelet of "+name+" registers it ("+what+")", "")
	t := v.s.t
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := guest.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("clean-up: delete Node %s: %v", name, err)
		}
	})
}

// DeleteDaemonSet deletes it as `kubectl delete daemonset` does; the clean-up
// of the step that created or patched it puts it back.
func (v *V) DeleteDaemonSet(namespace, name string) {
	ctx, cancel := v.s.ctx()
	defer cancel()
	v.Must(guest.client.AppsV1().DaemonSets(namespace).Delete(ctx, name, metav1.DeleteOptions{}))
	v.Show("-", "kubectl -n "+namespace+" delete daemonset "+name, "")
}

// installKubeProxyLeftovers writes into node's iptables what kube-proxy
// v1.36's iptables mode leaves after it stops, for the NodePort Service
// migrate43 on clusterIP (testdata/kube-proxy-leftovers.rules). Should the
// scenario end before its clean-up removed them, they are removed then.
func (v *V) installKubeProxyLeftovers(node, clusterIP string) {
	rules, err := os.ReadFile(filepath.Join(guest.repo, "e2e/scenarios/testdata/kube-proxy-leftovers.rules"))
	v.Must(err)
	text := strings.NewReplacer("CLUSTER_IP", clusterIP, "NODE_PORT", strconv.Itoa(migratePort)).Replace(string(rules))
	ipt, err := iptables.New(iptables.IPv4, iptables.InNetNS("/run/netns/"+node))
	v.Must(err)
	t := v.s.t
	// Registered after StopProxier's guard, so it runs before the guard
	// restores the daemon (clean-ups run last first).
	t.Cleanup(func() {
		if n, err := kubeProxyRules(node); err != nil || n == 0 {
			return
		}
		// The command waits for the node's lock: the daemon first.
		if err := stopProxier(node, syscall.SIGTERM); err != nil {
			t.Errorf("clean-up: %v", err)
		}
		if a := run(node, "ipvsproxy cleanup --kube-proxy-leftovers"); a.Status != 0 {
			t.Errorf("clean-up: ipvsproxy cleanup --kube-proxy-leftovers: %s", oneline(a.Out))
		}
		if err := restoreProxier(node, 120*time.Second); err != nil {
			t.Errorf("clean-up: %v", err)
		}
	})
	v.Must(ipt.Restore([]byte(text)))
	v.Show(node, "iptables-restore --noflush < kube-proxy-leftovers.rules  # CLUSTER_IP="+clusterIP+" NODE_PORT="+strconv.Itoa(migratePort)+", with the iptables package", "")
}

// savedTables is the node's filter, nat, mangle and raw tables of a
// family, read with the iptables package (no counters).
func savedTables(node string, family iptables.Family) (string, error) {
	ipt, err := iptables.New(family, iptables.InNetNS("/run/netns/"+node))
	if err != nil {
		return "", err
	}
	order := []iptables.Table{iptables.TableFilter, iptables.TableNAT, iptables.TableMangle, "raw"}
	tables, err := ipt.SaveTables(order...)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, t := range order {
		b.Write(tables[t])
	}
	return b.String(), nil
}

// kubeProxyRules counts the node's IPv4 rule and chain lines naming a chain
// only kube-proxy makes.
func kubeProxyRules(node string) (int, error) {
	saved, err := savedTables(node, iptables.IPv4)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range strings.Split(saved, "\n") {
		if kubeProxyChains.MatchString(l) {
			n++
		}
	}
	return n, nil
}

// nodeState is what of the proxier's a node holds, to compare before and
// after a command that must not touch it.
type nodeState struct{ ipvs, rules, sets string }

func proxierState(node string) (nodeState, error) {
	var st nodeState
	var err error
	if st.ipvs, err = ipvsTable(node); err != nil {
		return st, err
	}
	for _, f := range []iptables.Family{iptables.IPv4, iptables.IPv6} {
		saved, err := savedTables(node, f)
		if err != nil {
			return st, err
		}
		st.rules += saved
	}
	st.sets, err = ipsetDump(node)
	return st, err
}

// ApplyDaemonSet creates or replaces ds as `kubectl apply -f` would; when
// the scenario ends the DaemonSet is deleted, or the one it replaced put
// back.
func (v *V) ApplyDaemonSet(ds *appsv1.DaemonSet) {
	ctx, cancel := v.s.ctx()
	defer cancel()
	old, err := cluster.ApplyDaemonSet(ctx, guest.client, ds)
	v.Must(err)
	t := v.s.t
	t.Cleanup(func() {
		if err := restoreDaemonSet(ds.Namespace, ds.Name, old); err != nil {
			t.Errorf("clean-up: %v", err)
		}
	})
}

// PatchDaemonSet patches namespace/name with the repository's file as
// `kubectl patch --patch-file` does; the DaemonSet is put back when the
// scenario ends.
func (v *V) PatchDaemonSet(namespace, name, file string) {
	patch, err := os.ReadFile(filepath.Join(guest.repo, file))
	v.Must(err)
	ctx, cancel := v.s.ctx()
	defer cancel()
	old, err := cluster.PatchDaemonSet(ctx, guest.client, namespace, name, patch)
	v.Must(err)
	t := v.s.t
	t.Cleanup(func() {
		if err := restoreDaemonSet(namespace, name, old); err != nil {
			t.Errorf("clean-up: %v", err)
		}
	})
}

// PatchDaemonSetWith patches namespace/name with patch (a strategic merge),
// shown as the command it stands for; the DaemonSet is put back when the
// scenario ends.
func (v *V) PatchDaemonSetWith(namespace, name string, patch []byte, shown string) {
	ctx, cancel := v.s.ctx()
	defer cancel()
	old, err := cluster.PatchDaemonSet(ctx, guest.client, namespace, name, patch)
	v.Must(err)
	v.Show("-", shown, "")
	t := v.s.t
	t.Cleanup(func() {
		if err := restoreDaemonSet(namespace, name, old); err != nil {
			t.Errorf("clean-up: %v", err)
		}
	})
}

// restoreDaemonSet puts back old's labels, annotations and spec; old nil:
// deletes the DaemonSet.
func restoreDaemonSet(namespace, name string, old *appsv1.DaemonSet) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dss := guest.client.AppsV1().DaemonSets(namespace)
	if old == nil {
		if err := dss.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete DaemonSet %s/%s: %w", namespace, name, err)
		}
		return nil
	}
	cur, err := dss.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil // deleted by a later clean-up of the same scenario
	} else if err != nil {
		return err
	}
	cur.Labels, cur.Annotations, cur.Spec = old.Labels, old.Annotations, old.Spec
	if _, err := dss.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("put DaemonSet %s/%s back: %w", namespace, name, err)
	}
	return nil
}

// DaemonSetsFor names, space-separated, the DaemonSets of kube-system that
// would run a pod on node, shown as `e2ectl daemonsets-for` prints them.
func (v *V) DaemonSetsFor(node string) string {
	ctx, cancel := v.s.ctx()
	defer cancel()
	names, err := cluster.DaemonSetsFor(ctx, guest.client, "kube-system", node)
	v.Must(err)
	slices.Sort(names)
	on := strings.Join(names, " ")
	v.Show("-", "e2ectl daemonsets-for "+node, on)
	return on
}

// lineChanges says briefly how after differs from before, line by line:
// how many lines went and came, and the first of each.
func lineChanges(before, after string) string {
	was, is := strings.Split(before, "\n"), strings.Split(after, "\n")
	var gone, came []string
	for _, l := range was {
		if !slices.Contains(is, l) {
			gone = append(gone, l)
		}
	}
	for _, l := range is {
		if !slices.Contains(was, l) {
			came = append(came, l)
		}
	}
	first := func(ls []string) string {
		if len(ls) == 0 {
			return ""
		}
		return fmt.Sprintf(" (first %q)", ls[0])
	}
	return fmt.Sprintf("%d lines gone%s, %d came%s", len(gone), first(gone), len(came), first(came))
}
