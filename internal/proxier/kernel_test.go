package proxier

import (
	"errors"
	"github.com/ipvsproxy/ipvsproxy/internal/cleanup"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/adapters/adapterstest"
	"github.com/ipvsproxy/ipvsproxy/internal/hostsetup"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	v1 "k8s.io/api/core/v1"
)

// realKernelInNamespace opens every real adapter inside a fresh named
// network namespace, removed when the test ends, with IPv4's rules; it skips
// where the kernel lacks IPVS or the dummy driver (adapterstest.Real).
func realKernelInNamespace(t testing.TB) adapters.Kernel {
	t.Helper()
	return adapterstest.Real(t, v1.IPv4Protocol)
}

// TestProxierOnRealKernel runs a sync, a resync, a restart and a cleanup
// against the real kernel: the resync and the restart must write nothing,
// which proves that what the proxier reads back (virtual servers, set
// members, iptables rules) compares equal to what it wrote.
// It runs with cluster IPs bound one by one, and with their Service CIDR
// routed local on kube-ipvs0 (routes.go).
func TestProxierOnRealKernel(t *testing.T) {
	t.Run("addresses", func(t *testing.T) { proxierOnRealKernel(t, testConfig()) })
	t.Run("service CIDR route", func(t *testing.T) { proxierOnRealKernel(t, routedConfig()) })
}

func proxierOnRealKernel(t *testing.T, cfg ipvsproxy.Config) {
	k := realKernelInNamespace(t)
	// Decided by the kernel the VM boots, not by a probe, so that a kernel
	// that lost twos fails here: Debian's 6.1 kernels (IPVSPROXY_VM_KERNEL
	// 6.1 and cloud) are built without it, every other has it.
	want := "twos"
	if v := os.Getenv("IPVSPROXY_VM_KERNEL"); v == "6.1" || v == "cloud" {
		want = hostsetup.FallbackScheduler
	}
	if got := onThisKernel(t, k, cfg).Scheduler; got != want {
		t.Fatalf("the VM's kernel (%q) gives the %s scheduler, want %s", os.Getenv("IPVSPROXY_VM_KERNEL"), got, want)
	}
	world := func(p *Proxier) {
		web := servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080), func(s *v1.Service) {
			s.Spec.ExternalIPs = []string{"203.0.113.5"}
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		})
		lb := servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140"), servicetest.ExternalLocal(32122), func(s *v1.Service) {
			s.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24"}
		})
		dns := servicetest.Service("dns", "10.96.0.53", servicetest.Protocol(v1.ProtocolUDP), servicetest.NodePort(30053))
		sctp := servicetest.Service("sctp", "10.96.0.60", servicetest.Protocol(v1.ProtocolSCTP), servicetest.NodePort(30060))
		for _, s := range []*v1.Service{web, lb, dns, sctp} {
			p.Tracker().SetService(s)
			p.Tracker().SetEndpointSlice(servicetest.Slice(s, s.Name+"-a", 8080, "10.244.1.5@node1", "10.244.2.7@node2"))
		}
	}
	// Someone else's virtual server at an address:port a Service names
	// (web's external IP 203.0.113.5:80): never adopted (ownership.go).
	foreign := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("203.0.113.5"), Port: 80}
	if err := k.IPVS.AddVirtualServer(ipvs.VirtualServer{VirtualServerKey: foreign, Scheduler: "rr"}); err != nil {
		t.Fatal(err)
	}
	foreignRS := ipvs.RealServer{RealServerKey: ipvs.RealServerKey{Address: netip.MustParseAddr("192.0.2.9"), Port: 80}, Weight: 3}
	if err := k.IPVS.AddRealServer(foreign, foreignRS); err != nil {
		t.Fatal(err)
	}
	checkForeign := func(when string) {
		t.Helper()
		vss, _ := k.IPVS.VirtualServers()
		found := false
		for _, vs := range vss {
			if vs.VirtualServerKey == foreign {
				found = vs.Scheduler == "rr"
			}
		}
		rss, err := k.IPVS.RealServers(foreign)
		if !found || err != nil || len(rss) != 1 || rss[0].RealServerKey != foreignRS.RealServerKey || rss[0].Weight != 3 {
			t.Fatalf("%s: the foreign virtual server changed: found rr=%v %v %v", when, found, rss, err)
		}
	}
	p, _ := newRealProxier(t, k, cfg)
	world(p)
	res := p.Sync()
	if err := res.Err(); err != nil {
		t.Fatalf("first sync: %v", err)
	}
	if res.Writes == 0 {
		t.Fatal("first sync wrote nothing")
	}
	rss, err := k.IPVS.RealServers(ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: servicetest.Node1IP, Port: 30080})
	if err != nil || len(rss) != 2 {
		t.Fatalf("node port real servers: %v %v", rss, err)
	}
	lbRSS, err := k.IPVS.RealServers(ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("203.0.113.140"), Port: 80})
	if err != nil || len(lbRSS) != 1 || lbRSS[0].Address != ep1.Address {
		t.Fatalf("Local LB real servers: %v %v", lbRSS, err)
	}

	checkForeign("first sync")
	routes, err := k.Netif.ServiceRoutes()
	if err != nil {
		t.Fatal(err)
	}
	bound, err := k.Netif.DummyAddresses()
	if err != nil {
		t.Fatal(err)
	}
	clusterIPBound := slices.Contains(bound, webVS.Address)
	if routed := len(cfg.ServiceCIDRs) > 0; !slices.Equal(routes, cfg.ServiceCIDRs) && (routed || len(routes) > 0) || routed == clusterIPBound {
		t.Fatalf("routes %v (want %v); cluster IP %s bound: %v", routes, cfg.ServiceCIDRs, webVS.Address, clusterIPBound)
	}

	p.needFull = true
	if res := p.Sync(); res.Err() != nil || res.Writes != 0 {
		t.Fatalf("full resync: writes=%d err=%v", res.Writes, res.Err())
	}
	checkForeign("full sync")
	p2, _ := newRealProxier(t, k, cfg)
	world(p2)
	if res := p2.Sync(); res.Err() != nil || res.Writes != 0 {
		t.Fatalf("restart: writes=%d err=%v", res.Writes, res.Err())
	}

	// A drained TCP endpoint without connections goes at once.
	web := servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080))
	p2.Tracker().SetEndpointSlice(servicetest.Slice(web, "web-a", 8080, "10.244.1.5@node1"))
	if res := p2.Sync(); res.Err() != nil || res.Full {
		t.Fatalf("partial sync: full=%v err=%v", res.Full, res.Err())
	}
	if rss, _ := k.IPVS.RealServers(webVS); len(rss) != 1 {
		t.Fatalf("after endpoint removal: %v", rss)
	}

	checkForeign("restart")
	if err := cleanup.Installed(k, cfg.Families); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	checkForeign("cleanup")
	if vss, _ := k.IPVS.VirtualServers(); len(vss) != 1 {
		t.Fatalf("virtual servers left besides the foreign one: %v", vss)
	}
	sets, _ := k.IPSet.Sets()
	for _, s := range sets {
		if strings.HasPrefix(s.Name, "KUBE-") {
			t.Fatalf("set left: %s", s.Name)
		}
	}
	for _, table := range owned.Tables {
		save, _ := k.IPTables[v1.IPv4Protocol].Save(table)
		if strings.Contains(string(save), "KUBE-") {
			t.Fatalf("rules left in %s:\n%s", table, save)
		}
	}
	if _, err := k.Netif.DummyAddresses(); !errors.Is(err, netif.ErrNotFound) {
		t.Fatalf("%s left: %v", owned.DummyInterface, err)
	}
}

// onThisKernel is cfg with the scheduler the daemon would run on k's
// kernel (hostsetup.ChooseScheduler, its start-up step): wrr where the
// kernel has no twos, as Debian's 6.1 kernels have not.
func onThisKernel(t testing.TB, k adapters.Kernel, cfg ipvsproxy.Config) ipvsproxy.Config {
	t.Helper()
	cfg, _, err := hostsetup.ChooseScheduler(k.IPVS, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// newRealProxier is a proxier on k with cfg's scheduler chosen as the
// daemon chooses it (onThisKernel).
func newRealProxier(t testing.TB, k adapters.Kernel, cfg ipvsproxy.Config) (*Proxier, error) {
	t.Helper()
	p, err := New(onThisKernel(t, k, cfg), servicetest.ThisNode, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	// As in every live cluster: without it deletions are held (emptyworld.go).
	p.Tracker().SetService(apiServerService())
	return p, nil
}

// TestExcludeCIDRsOnRealKernel is TestExcludeCIDRsLimitCleanUpOnly against
// the kernel: what readKernel reads back inside the
// excluded ranges must let a restart write nothing, and a foreign virtual
// server there must come through every sync as it was.
func TestExcludeCIDRsOnRealKernel(t *testing.T) {
	k := realKernelInNamespace(t)
	cfg := testConfig()
	cfg.ExcludeCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.200.0/24"), netip.MustParsePrefix("203.0.113.200/29")}
	foreign := ipvs.VirtualServer{VirtualServerKey: webVSFor("203.0.113.201"), Scheduler: "rr"}
	foreignRS := ipvs.RealServer{RealServerKey: ipvs.RealServerKey{Address: netip.MustParseAddr("192.0.2.9"), Port: 80}, Weight: 3}
	if err := k.Netif.EnsureDummy(); err != nil {
		t.Fatal(err)
	}
	if err := k.Netif.AddDummyAddress(foreign.Address); err != nil {
		t.Fatal(err)
	}
	if err := k.IPVS.AddVirtualServer(foreign); err != nil {
		t.Fatal(err)
	}
	if err := k.IPVS.AddRealServer(foreign.VirtualServerKey, foreignRS); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.IPVS.DeleteVirtualServer(foreign.VirtualServerKey) })
	svc := servicetest.Service("excluded", "10.96.200.20", servicetest.LoadBalancer(30200, "203.0.113.150"))
	world := func(p *Proxier) {
		p.Tracker().SetService(svc)
		p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "excluded-a", 8080, "10.244.1.5@node1"))
	}
	p, _ := newRealProxier(t, k, cfg)
	world(p)
	if res := p.Sync(); res.Err() != nil {
		t.Fatalf("first sync: %v", res.Err())
	}
	clusterVS := webVSFor("10.96.200.20")
	for _, key := range []ipvs.VirtualServerKey{clusterVS, {Protocol: ipvs.TCP, Address: servicetest.Node1IP, Port: 30200}, webVSFor("203.0.113.150")} {
		if rss, err := k.IPVS.RealServers(key); err != nil || len(rss) != 1 || rss[0].RealServerKey != ep1 {
			t.Fatalf("%s: %v %v", key, rss, err)
		}
	}
	p2, _ := newRealProxier(t, k, cfg)
	world(p2)
	if res := p2.Sync(); res.Err() != nil || res.Writes != 0 {
		t.Fatalf("restart: writes=%d err=%v", res.Writes, res.Err())
	}
	p2.Tracker().DeleteService("default", "excluded")
	p2.Tracker().DeleteEndpointSlice(servicetest.Slice(svc, "excluded-a", 8080))
	p2.needFull = true
	if res := p2.Sync(); res.Err() != nil {
		t.Fatalf("sync after deletion: %v", res.Err())
	}
	if _, err := k.IPVS.RealServers(clusterVS); err != nil {
		t.Fatalf("excluded %s was cleaned up: %v", clusterVS, err)
	}
	if _, err := k.IPVS.RealServers(webVSFor("203.0.113.150")); !errors.Is(err, ipvs.ErrNotFound) {
		t.Fatalf("the LB virtual server outside the ranges should be gone: %v", err)
	}
	vss, _ := k.IPVS.VirtualServers()
	rss, err := k.IPVS.RealServers(foreign.VirtualServerKey)
	if err != nil || len(rss) != 1 || rss[0].RealServerKey != foreignRS.RealServerKey || rss[0].Weight != 3 || !slices.Contains(vss, foreign) {
		t.Fatalf("foreign virtual server changed: %v %v (all: %v)", rss, err, vss)
	}
}
