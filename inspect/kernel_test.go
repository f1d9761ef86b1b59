package inspect

import (
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/hostsetup"
	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/iptables"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/ipvsproxy/ipvsproxy/netif"
	"github.com/ipvsproxy/ipvsproxy/sysctl"
	v1 "k8s.io/api/core/v1"
)

// TestCheckOnRealKernel runs the proxier and inspect against the real
// adapters in a fresh network namespace (the VM: this host has no IPVS):
// the kernel agrees after a sync, differs after a real server is deleted
// behind the proxier's back, and agrees again after a full sync.
func TestCheckOnRealKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.NotRoot, "needs root")
	}
	ns, path := netnstest.NewNamed(t, "ipvsproxy-i-")
	netnstest.LoopbackUp(t, ns, netip.MustParseAddr("198.51.100.1"))
	h, err := ipvs.NewInNamespace(ns)
	if errors.Is(err, ipvs.ErrUnsupported) {
		kerneltest.Skip(t, kerneltest.NoIPVS, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	nif, err := netif.NewInNamespace(owned.DummyInterface, ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := nif.EnsureDummy(); errors.Is(err, netif.ErrUnsupported) {
		kerneltest.Skip(t, kerneltest.NoDummy, "%v", err)
	}
	sets, err := ipset.NewInNamespace(ns)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := conntrack.NewInNamespace(int(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ct.Close() })
	ipt, err := iptables.New(iptables.IPv4, iptables.InNetNS(path))
	if errors.Is(err, iptables.ErrUnsupported) {
		kerneltest.Skip(t, kerneltest.NoTool, "no iptables: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	k := adapters.Kernel{IPVS: h, Netif: nif, IPSet: sets, Conntrack: ct, Sysctl: sysctl.NewFake(nil),
		IPTables: map[v1.IPFamily]iptables.Interface{v1.IPv4Protocol: ipt}}
	t.Cleanup(func() { proxier.Cleanup(k, ipvsproxy.DefaultConfig()) })

	onFakes := newNode(t) // the same Services and configuration, on the fakes
	n := &node{objects: onFakes.objects}
	// The scheduler as the daemon chooses it at start-up: wrr where the
	// kernel has no twos, as Debian's 6.1 kernels have not.
	cfg, _, err := hostsetup.ChooseScheduler(h, onFakes.proxier.Config())
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
	reader, ok := h.(IPVSReader)
	if !ok {
		t.Fatal("the kernel IPVS adapter does not read counters")
	}
	readers := Kernel{IPVS: reader, Addresses: nif, Sets: sets, Flows: ct}
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
	if err := h.DeleteRealServer(webVS, web2); err != nil {
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
