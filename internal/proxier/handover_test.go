package proxier

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	v1 "k8s.io/api/core/v1"
)

// kube-proxy's IPVS mode after its first sync on ipvsproxy's state: it
// declared the chains whose names it shares with ipvsproxy (which flushes
// them) and wrote its own rules, matching only the sets of its own names.
const kubeProxyTookOver = `*nat
:KUBE-SERVICES - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-POSTROUTING - [0:0]
-A KUBE-SERVICES -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set %[1]sCLUSTER-IP dst,dst -j ACCEPT
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
COMMIT
*filter
:KUBE-IPVS-FILTER - [0:0]
:KUBE-FORWARD - [0:0]
-A KUBE-IPVS-FILTER -m set --match-set %[1]sCLUSTER-IP dst,dst -j RETURN
COMMIT
`

// The rollback to kube-proxy's IPVS mode: refused, changing nothing, while
// ipvsproxy's rules are in place; once kube-proxy has rewritten the chains,
// the mangle filter, ipvsproxy's own sets (the ownership record last) and
// the Service CIDR routes go, and the virtual servers, kube-ipvs0 and every
// set of a name kube-proxy uses stay. A second run removes nothing.
func TestCleanupAfterKubeProxyIPVS(t *testing.T) {
	fk := newFakeKernel()
	cfg := routedConfig()
	cfg.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	cfg.ServiceCIDRs = append(cfg.ServiceCIDRs, netip.MustParsePrefix("fd00:96::/112"))
	p, _ := newTestProxier(t, fk, cfg)
	web := servicetest.Service("web", "10.96.0.10")
	web.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:96::10"}
	lb := servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30080, "203.0.113.140"))
	lb.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24"}
	p.Tracker().SetService(web)
	p.Tracker().SetService(lb)
	p.Tracker().SetEndpointSlice(servicetest.Slice(web, "web-1", 8080, "10.244.1.10"))
	p.Tracker().SetEndpointSlice(servicetest.Slice(lb, "lb-1", 8080, "10.244.1.11"))
	mustSync(t, p)
	virtualServers, _ := fk.ipvs.VirtualServers()
	if len(virtualServers) < 3 || !strings.Contains(fk.ipt4.Dump(), owned.ChainIPVSOutFilter) {
		t.Fatalf("the state to hand over is not there: %d virtual servers,\n%s", len(virtualServers), fk.ipt4.Dump())
	}

	// As the kernel: a set that a rule names is busy.
	f := &faults{}
	f.set(func(op, object string) error {
		if op == "ipset-destroy" && (strings.Contains(fk.ipt4.Dump(), " "+object+" ") || strings.Contains(fk.ipt6.Dump(), " "+object+" ")) {
			return ipset.ErrBusy
		}
		return nil
	})
	before := fk.writes()
	removed, err := CleanupAfterKubeProxyIPVS(fk.faultyKernel(f), cfg)
	if !errors.Is(err, ErrKubeProxyNotRunning) || len(removed) != 0 || fk.writes() != before {
		t.Fatalf("before kube-proxy took over: removed %v, %d writes, err %v; want a refusal and nothing written", removed, fk.writes()-before, err)
	}
	t.Logf("refused: %v", err)

	for _, ipt := range []struct {
		restore func([]byte) error
		prefix  string
	}{{fk.ipt4.Restore, "KUBE-"}, {fk.ipt6.Restore, "KUBE-6-"}} {
		if err := ipt.restore([]byte(fmt.Sprintf(kubeProxyTookOver, ipt.prefix))); err != nil {
			t.Fatal(err)
		}
	}
	removed, err = CleanupAfterKubeProxyIPVS(fk.faultyKernel(f), cfg)
	if err != nil {
		t.Fatalf("%v\nremoved:\n%s", err, strings.Join(removed, "\n"))
	}
	t.Logf("removed:\n%s", strings.Join(removed, "\n"))
	for _, rules := range []string{fk.ipt4.Dump(), fk.ipt6.Dump()} {
		if strings.Contains(rules, owned.ChainIPVSOutFilter) && strings.Contains(rules, "*mangle") && strings.Contains(rules[strings.Index(rules, "*mangle"):], owned.ChainIPVSOutFilter) {
			t.Errorf("mangle %s left:\n%s", owned.ChainIPVSOutFilter, rules)
		}
		if !strings.Contains(rules, "CLUSTER-IP dst,dst -j ACCEPT") {
			t.Errorf("kube-proxy's rule removed:\n%s", rules)
		}
	}
	sets := fk.ipset.Dump()
	for _, gone := range []string{"KUBE-IPVS-OWNED", "KUBE-6-IPVS-OWNED", "KUBE-SERVICE-CIDRS", "KUBE-6-SERVICE-CIDRS", "KUBE-LOAD-BALANCER-NO-NODE", "KUBE-IPVS-SERVICES"} {
		if strings.Contains(sets, "set "+gone+" ") {
			t.Errorf("ipvsproxy's own set %s left:\n%s", gone, sets)
		}
	}
	for _, kept := range []string{"set KUBE-CLUSTER-IP ", "set KUBE-6-CLUSTER-IP ", "set KUBE-LOAD-BALANCER-FW ", "set KUBE-IPVS-IPS "} {
		if !strings.Contains(sets, kept) {
			t.Errorf("%q, a name kube-proxy uses, removed:\n%s", kept, sets)
		}
	}
	if after, _ := fk.ipvs.VirtualServers(); len(after) != len(virtualServers) {
		t.Errorf("%d virtual servers after, %d before: they are kube-proxy's now", len(after), len(virtualServers))
	}
	if routes, err := fk.netif.ServiceRoutes(); err != nil || len(routes) != 0 {
		t.Errorf("Service CIDR routes left: %v (%v)", routes, err)
	}
	if !strings.HasPrefix(fk.netif.Dump(), "dummy "+owned.DummyInterface) {
		t.Errorf("%s removed:\n%s", owned.DummyInterface, fk.netif.Dump())
	}
	if again, err := CleanupAfterKubeProxyIPVS(fk.faultyKernel(f), cfg); err != nil || len(again) != 0 {
		t.Errorf("second run removed %v (%v), want nothing", again, err)
	}
}

// kernelDump is every fake's state at once, to compare a node before and
// after a step that must change nothing.
func (fk *fakeKernel) kernelDump() string {
	return fk.ipvs.Dump() + fk.netif.Dump() + fk.ipset.Dump() + fk.ipt4.Dump() + fk.ipt6.Dump()
}

// A node handed back to kube-proxy's IPVS mode keeps kube-proxy's state
// through a later plain `ipvsproxy cleanup` (a rollback pod run again, an
// uninstall job): with ipvsproxy's record and its own sets gone, the
// virtual servers, kube-ipvs0 with kube-proxy's bound addresses, and the
// chains and sets of the names the two share are kube-proxy's. The
// ownership rule once took every virtual server on a kube-ipvs0 address
// for ipvsproxy's when kube-proxy-named sets stood without the record, and
// the clean-up deleted them with kube-ipvs0.
func TestCleanupAfterHandoverLeavesKubeProxysState(t *testing.T) {
	fk := newFakeKernel()
	cfg := routedConfig()
	cfg.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	cfg.ServiceCIDRs = append(cfg.ServiceCIDRs, netip.MustParsePrefix("fd00:96::/112"))
	p, _ := newTestProxier(t, fk, cfg)
	web := servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080))
	web.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:96::10"}
	lb := servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30081, "203.0.113.140"))
	p.Tracker().SetService(web)
	p.Tracker().SetService(lb)
	p.Tracker().SetEndpointSlice(servicetest.Slice(web, "web-1", 8080, "10.244.1.10"))
	p.Tracker().SetEndpointSlice(servicetest.Slice(lb, "lb-1", 8080, "10.244.1.11"))
	mustSync(t, p)
	for _, ipt := range []struct {
		restore func([]byte) error
		prefix  string
	}{{fk.ipt4.Restore, "KUBE-"}, {fk.ipt6.Restore, "KUBE-6-"}} {
		if err := ipt.restore([]byte(fmt.Sprintf(kubeProxyTookOver, ipt.prefix))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := CleanupAfterKubeProxyIPVS(fk.kernel(), cfg); err != nil {
		t.Fatal(err)
	}
	// kube-proxy binds every address it serves on kube-ipvs0, cluster
	// IPs included (it knows no Service CIDR route).
	all, _ := fk.ipvs.VirtualServers()
	host, _ := fk.netif.HostAddresses()
	for _, vs := range all {
		if !slices.Contains(host, vs.Address) {
			fk.netif.AddDummyAddress(vs.Address)
		}
	}
	if len(all) < 6 {
		t.Fatalf("%d virtual servers handed over, want those of two Services on two families", len(all))
	}
	before, writes := fk.kernelDump(), fk.writes()
	if err := Cleanup(fk.kernel(), cfg); err != nil {
		t.Fatal(err)
	}
	if after := fk.kernelDump(); after != before || fk.writes() != writes {
		t.Fatalf("cleanup after the handover wrote %d times; before:\n%s\nafter:\n%s", fk.writes()-writes, before, after)
	}
}

// A node that never ran ipvsproxy, with kube-proxy's IPVS mode's state:
// `ipvsproxy cleanup` (a rollback pod on the wrong node) changes nothing.
func TestCleanupLeavesKubeProxyIPVSModeAlone(t *testing.T) {
	fk := newFakeKernel()
	for _, name := range []string{"KUBE-CLUSTER-IP", "KUBE-NODE-PORT-TCP", "KUBE-EXTERNAL-IP-LOCAL", "KUBE-NODE-PORT-LOCAL-TCP", "KUBE-LOAD-BALANCER-FW"} {
		if err := fk.ipset.CreateSet(ipset.Set{Name: name, Type: ipset.HashIPPort, Family: ipset.IPv4}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fk.ipset.CreateSet(ipset.Set{Name: "KUBE-LOAD-BALANCER-SOURCE-CIDR", Type: ipset.HashIPPortNet, Family: ipset.IPv4}); err != nil {
		t.Fatal(err)
	}
	if err := fk.ipt4.Restore([]byte(fmt.Sprintf(kubeProxyIPVSMode, "KUBE-", "KUBE-LOAD-BALANCER-SOURCE-CIDR"))); err != nil {
		t.Fatal(err)
	}
	fk.netif.EnsureDummy()
	fk.netif.AddDummyAddress(webVS.Address)
	fk.ipvs.AddVirtualServer(ipvs.VirtualServer{VirtualServerKey: webVS, Scheduler: "rr"})
	fk.ipvs.AddRealServer(webVS, ipvs.RealServer{RealServerKey: ep1, Weight: 1})
	nodePort := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: servicetest.Node1IP, Port: 30080}
	fk.ipvs.AddVirtualServer(ipvs.VirtualServer{VirtualServerKey: nodePort, Scheduler: "rr"})
	before, writes := fk.kernelDump(), fk.writes()
	if err := Cleanup(fk.kernel(), testConfig()); err != nil {
		t.Fatal(err)
	}
	if after := fk.kernelDump(); after != before || fk.writes() != writes {
		t.Fatalf("cleanup on kube-proxy's node wrote %d times; before:\n%s\nafter:\n%s", fk.writes()-writes, before, after)
	}
}
