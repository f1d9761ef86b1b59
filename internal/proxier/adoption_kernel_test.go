package proxier

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
)

// The replacement of a wrong-typed set that iptables references, on this
// machine's kernel (ipset and iptables are real, in a fresh namespace; IPVS
// and the link are fakes, since this host has neither): the kernel refuses
// to destroy the referenced set, and the proxier still ends with the right
// type and its rules intact, with no window in which the rules match
// nothing.
func TestWrongTypeSetIsReplacedOnRealKernel(t *testing.T) {
	sets, ipt, path := realSetsAndRules(t)
	// The older layout, referenced by a rule of ours.
	if err := sets.CreateSet(ipset.Set{Name: owned.SetLoopBack, Type: ipset.HashIP, Family: ipset.IPv4}); err != nil {
		t.Fatal(err)
	}
	if err := ipt.Restore([]byte("*nat\n:KUBE-POSTROUTING - [0:0]\n-A KUBE-POSTROUTING -m set --match-set KUBE-LOOP-BACK dst -j MASQUERADE\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
	if err := sets.DestroySet(owned.SetLoopBack); err == nil {
		t.Fatal("the kernel destroyed a referenced set; this test would prove nothing")
	}
	links := netif.NewFake(owned.DummyInterface)
	k := adapters.Kernel{IPVS: ipvs.NewFake(), Netif: links, IPSet: sets, IPTables: map[v1.IPFamily]iptables.Interface{v1.IPv4Protocol: ipt}}
	p, err := New(testConfig(), servicetest.ThisNode, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	out, err := exec.Command("ip", "netns", "exec", strings.TrimPrefix(path, "/run/netns/"), "ipset", "list", owned.SetLoopBack).CombinedOutput()
	if err != nil {
		t.Fatalf("ipset list: %v %s", err, out)
	}
	if !strings.Contains(string(out), "Type: hash:ip,port,ip") || !strings.Contains(string(out), "10.244.1.5,tcp:8080,10.244.1.5") {
		t.Fatalf("KUBE-LOOP-BACK:\n%s", out)
	}
	all, _ := sets.Sets()
	for _, s := range all {
		if strings.HasSuffix(s.Name, owned.TempSetSuffix) {
			t.Fatalf("temporary set left: %s", s.Name)
		}
	}
	save, _ := ipt.Save(iptables.TableNAT)
	if !strings.Contains(string(save), "--match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE") {
		t.Fatalf("nat:\n%s", save)
	}
	// A second proxier (a restart) writes nothing.
	p2, _ := New(testConfig(), servicetest.ThisNode, k, nil)
	p2.Tracker().SetService(svc)
	p2.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	if res := mustSync(t, p2); res.Writes != 0 {
		t.Fatalf("restart wrote %d", res.Writes)
	}
}

// A set of ours that is smaller than --ipset-max-elements (made by an older
// run with a smaller flag) is replaced with the size asked for, on this
// machine's kernel, without a window for the rule that references it:
// otherwise the kernel would refuse members the capacity check
// admitted.
func TestSmallerSetIsReplacedOnRealKernel(t *testing.T) {
	sets, ipt, path := realSetsAndRules(t)
	if err := sets.CreateSet(ipset.Set{Name: owned.SetLoopBack, Type: ipset.HashIPPortIP, Family: ipset.IPv4, MaxElem: 16}); err != nil {
		t.Fatal(err)
	}
	if err := ipt.Restore([]byte("*nat\n:KUBE-POSTROUTING - [0:0]\n-A KUBE-POSTROUTING -m set --match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.IPSetMaxElements = 131072
	k := adapters.Kernel{IPVS: ipvs.NewFake(), Netif: netif.NewFake(owned.DummyInterface), IPSet: sets, IPTables: map[v1.IPFamily]iptables.Interface{v1.IPv4Protocol: ipt}}
	p, err := New(cfg, servicetest.ThisNode, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	out, err := exec.Command("ip", "netns", "exec", strings.TrimPrefix(path, "/run/netns/"), "ipset", "list", owned.SetLoopBack).CombinedOutput()
	if err != nil {
		t.Fatalf("ipset list: %v %s", err, out)
	}
	if !strings.Contains(string(out), "maxelem 131072") || !strings.Contains(string(out), "10.244.1.5,tcp:8080,10.244.1.5") {
		t.Fatalf("KUBE-LOOP-BACK:\n%s", out)
	}
	// A larger set than asked for is kept: a restart with the default
	// writes nothing.
	p2, _ := New(testConfig(), servicetest.ThisNode, k, nil)
	p2.Tracker().SetService(svc)
	p2.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	if res := mustSync(t, p2); res.Writes != 0 {
		t.Fatalf("restart with a smaller flag wrote %d", res.Writes)
	}
}

// realSetsAndRules opens this machine's ipset and IPv4 iptables in a fresh
// network namespace (path is its /run/netns path); it skips unless root.
func realSetsAndRules(t *testing.T) (ipset.Interface, iptables.Interface, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.NotRoot, "needs root")
	}
	ns, path := netnstest.NewNamed(t, "ipvsproxy-a-")
	sets, err := ipset.NewInNamespace(ns)
	if errors.Is(err, ipset.ErrUnsupported) {
		kerneltest.Skip(t, kerneltest.NoKernelFeature, "no ipset: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sets.Close() })
	ipt, err := iptables.New(iptables.IPv4, iptables.InNetNS(path))
	if errors.Is(err, iptables.ErrUnsupported) {
		kerneltest.Skip(t, kerneltest.NoTool, "no iptables: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return sets, ipt, path
}
