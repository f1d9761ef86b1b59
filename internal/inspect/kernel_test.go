package inspect

import (
	"github.com/ipvsproxy/ipvsproxy/internal/cleanup"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters/adapterstest"
	"github.com/ipvsproxy/ipvsproxy/internal/hostsetup"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
)

// TestCheckOnRealKernel runs the proxier and inspect against the real
// adapters in a fresh network namespace (the VM: this host has no IPVS):
// the kernel agrees after a sync, differs after a real server is deleted
// behind the proxier's back, and agrees again after a full sync.
func TestCheckOnRealKernel(t *testing.T) {
	k := adapterstest.Real(t, v1.IPv4Protocol)
	t.Cleanup(func() { cleanup.Installed(k, ipvsproxy.DefaultConfig().Families) })

	onFakes := newNode(t) // the same Services and configuration, on the fakes
	n := &node{objects: onFakes.objects}
	// The scheduler as the daemon chooses it at start-up: wrr where the
	// kernel has no twos, as Debian's 6.1 kernels have not.
	cfg, _, err := hostsetup.ChooseScheduler(k.IPVS, onFakes.proxier.Config())
	if err != nil {
		t.Fatal(err)
	}
	newProxier := func() *proxier.Proxier {
		p, err := proxier.New(cfg, "node1", k, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	n.start(t, newProxier())
	reader, ok := k.IPVS.(IPVSReader)
	if !ok {
		t.Fatal("the kernel IPVS adapter does not read counters")
	}
	readers := Kernel{IPVS: reader, Addresses: k.Netif, Sets: k.IPSet, Flows: k.Conntrack}
	check := func() CheckResult {
		t.Helper()
		st, err := ReadKernel(readers)
		if err != nil || len(st.Warnings) > 0 {
			t.Fatalf("read the kernel: %v %v", err, st.Warnings)
		}
		return Check(st, n.proxier.Snapshot())
	}
	if res := check(); res.ExitCode() != CheckAgree {
		t.Fatalf("after a sync: %v", res.Differences)
	}
	// As `ipvsadm -d -t 10.96.0.10:80 -r 10.244.2.7:8080` would.
	if err := k.IPVS.DeleteRealServer(webVS, web2); err != nil {
		t.Fatal(err)
	}
	res := check()
	if res.ExitCode() != CheckDiffer || len(res.Differences) != 1 ||
		res.Differences[0].String() != "missing real server 10.244.2.7:8080 of TCP 10.96.0.10:80 (default/web:http): want weight 1, have none" {
		t.Fatalf("after deleting a real server: %v", res.Differences)
	}
	st, _ := ReadKernel(readers)
	r := NewReport(st, ptrTo(n.proxier.Snapshot()), "daemon", created)
	if len(r.VirtualServers) != 2 || r.VirtualServers[0].Service != "default/web" || !strings.Contains(r.Sets[0].Name, "KUBE-") {
		t.Fatalf("report on the real kernel: %+v", r)
	}
	n.start(t, newProxier()) // a restart: its first sync is full and repairs
	if res := check(); res.ExitCode() != CheckAgree {
		t.Fatalf("after the repairing sync: %v", res.Differences)
	}
}

func ptrTo[T any](v T) *T { return &v }
