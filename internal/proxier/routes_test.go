package proxier

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
	networking "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var serviceRange = netip.MustParsePrefix("10.96.0.0/16")

func routedConfig() ipvsproxy.Config {
	cfg := testConfig()
	cfg.ServiceCIDRs = []netip.Prefix{serviceRange}
	return cfg
}

func withExternalIPs(ips ...string) servicetest.Option {
	return func(s *v1.Service) { s.Spec.ExternalIPs = ips }
}

// orderedNetif records the order of kube-ipvs0 writes.
type orderedNetif struct {
	netif.Interface
	log []string
}

func (o *orderedNetif) AddDummyAddress(a netip.Addr) error {
	o.log = append(o.log, "bind "+a.String())
	return o.Interface.AddDummyAddress(a)
}

func (o *orderedNetif) DeleteDummyAddress(a netip.Addr) error {
	o.log = append(o.log, "unbind "+a.String())
	return o.Interface.DeleteDummyAddress(a)
}

func (o *orderedNetif) AddServiceRoute(p netip.Prefix) error {
	o.log = append(o.log, "route "+p.String())
	return o.Interface.AddServiceRoute(p)
}

func (o *orderedNetif) DeleteServiceRoute(p netip.Prefix) error {
	o.log = append(o.log, "unroute "+p.String())
	return o.Interface.DeleteServiceRoute(p)
}

func TestServiceCIDRIsRoutedAndItsClusterIPsAreNotBound(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, routedConfig())
	svc := servicetest.Service("web", "10.96.0.10", withExternalIPs("203.0.113.10"))
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)

	// One route; the network address anchors IPv4 on the link; the
	// external IP is bound; the cluster IP is not.
	wantDump := "dummy kube-ipvs0\n  10.96.0.0/32\n  203.0.113.10/32\n  route local 10.96.0.0/16\n"
	if d := fk.netif.Dump(); !strings.HasPrefix(d, wantDump) {
		t.Fatalf("kube-ipvs0:\n%s\nwant it to start with\n%s", d, wantDump)
	}
	if got := realServers(t, fk, webVS); len(got) != 1 {
		t.Fatalf("cluster IP virtual server real servers %v", got)
	}
	sets := fk.ipset.Dump()
	for _, want := range []string{"set KUBE-SERVICE-CIDRS hash:net inet\n  10.96.0.0/16\n", "set KUBE-IPVS-IPS hash:ip inet\n  10.96.0.0\n  203.0.113.10\n", "  10.96.0.10,tcp:80\n"} {
		if !strings.Contains(sets, want) {
			t.Errorf("ipsets lack %q:\n%s", want, sets)
		}
	}
	if ipt := fk.ipt4.Dump(); !strings.Contains(ipt, "-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set KUBE-SERVICE-CIDRS dst -j REJECT --reject-with icmp-port-unreachable") {
		t.Errorf("no reject rule for the routed ranges:\n%s", ipt)
	}

	// A periodic full sync and a restart write nothing and keep owning
	// the cluster IP's virtual server, which no address marks as ours now.
	writes := fk.writes()
	p.needFull = true
	if res := mustSync(t, p); res.Writes != 0 {
		t.Fatalf("full resync wrote %d", res.Writes)
	}
	p2, _ := newTestProxier(t, fk, routedConfig())
	p2.Tracker().SetService(svc)
	p2.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	if res := mustSync(t, p2); res.Writes != 0 || fk.writes() != writes {
		t.Fatalf("restart wrote %d", res.Writes)
	}
	p2.Tracker().DeleteService("default", "web")
	mustSync(t, p2)
	if d := fk.ipvs.Dump(); d != "" {
		t.Fatalf("virtual servers of a deleted Service in the routed range stayed:\n%s", d)
	}
}

// Moving between binding and routing never leaves a cluster IP without a
// local path: the route comes before the unbinding, and the bindings before
// the route goes.
func TestServiceCIDRObjectsSwitchBindingWithoutAGap(t *testing.T) {
	fk := newFakeKernel()
	o := &orderedNetif{Interface: fk.netif}
	k := fk.kernel()
	k.Netif = o
	p, err := New(testConfig(), servicetest.ThisNode, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Tracker().SetService(apiServerService())
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	if !slices.Equal(o.log, []string{"bind 10.96.0.10"}) {
		t.Fatalf("without Service CIDRs: %v", o.log)
	}

	o.log = nil
	cidr := &networking.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networking.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/16", "fd00:96::/112"}}}
	p.Tracker().SetServiceCIDR(cidr)
	if res := mustSync(t, p); !res.Full {
		t.Fatal("a ServiceCIDR change did not make a full sync")
	}
	// The anchor first, so the route is never on a link without an IPv4
	// address (the kernel would flush it), then the route, then the unbinding.
	if want := []string{"bind 10.96.0.0", "route 10.96.0.0/16", "unbind 10.96.0.10"}; !slices.Equal(o.log, want) {
		t.Fatalf("routing the range: %v, want %v (the IPv6 family is not proxied)", o.log, want)
	}

	o.log = nil
	p.Tracker().DeleteServiceCIDR("kubernetes")
	mustSync(t, p)
	if want := []string{"bind 10.96.0.10", "unbind 10.96.0.0", "unroute 10.96.0.0/16"}; !slices.Equal(o.log, want) {
		t.Fatalf("unrouting the range: %v, want %v", o.log, want)
	}
	if d := fk.ipset.Dump(); strings.Contains(d, "10.96.0.0/16") {
		t.Fatalf("the range stayed in KUBE-SERVICE-CIDRS:\n%s", d)
	}
}

// Unbinding the last external IP must not take the routes with it: the
// kernel (and the Fake) flush a link's IPv4 routes with its last IPv4
// address, which the anchor address prevents.
func TestUnbindingTheLastExternalIPKeepsTheRoute(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, routedConfig())
	svc := servicetest.Service("web", "10.96.0.10", withExternalIPs("203.0.113.10"))
	p.Tracker().SetService(svc)
	mustSync(t, p)
	p.Tracker().SetService(servicetest.Service("web", "10.96.0.10"))
	mustSync(t, p)
	routes, err := fk.netif.ServiceRoutes()
	if err != nil || !slices.Equal(routes, []netip.Prefix{serviceRange}) {
		t.Fatalf("routes after unbinding the external IP: %v, %v", routes, err)
	}
}

// A route flushed behind our back (the link lost every IPv4 address) is
// put back by the next full sync.
func TestFullSyncRestoresAFlushedRoute(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, routedConfig())
	mustSync(t, p)
	if err := fk.netif.DeleteDummyAddress(serviceRange.Addr()); err != nil {
		t.Fatal(err)
	}
	if routes, _ := fk.netif.ServiceRoutes(); len(routes) != 0 {
		t.Fatalf("the Fake kept %v after the last IPv4 address went", routes)
	}
	p.needFull = true
	mustSync(t, p)
	if routes, _ := fk.netif.ServiceRoutes(); !slices.Equal(routes, []netip.Prefix{serviceRange}) {
		t.Fatalf("routes after a full sync: %v", routes)
	}
}

// A range that would make a node address, pods or excluded addresses local
// is not routed; its cluster IPs are bound as before.
func TestUnsafeServiceCIDRsAreNotRouted(t *testing.T) {
	for _, r := range []string{"198.51.100.0/24", "10.244.0.0/20", "10.0.0.0/8", "0.0.0.0/0"} {
		t.Run(r, func(t *testing.T) {
			fk := newFakeKernel()
			cfg := testConfig()
			cfg.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix(r)}
			p, _ := newTestProxier(t, fk, cfg)
			svc := servicetest.Service("web", "10.96.0.10")
			p.Tracker().SetService(svc)
			mustSync(t, p)
			if routes, _ := fk.netif.ServiceRoutes(); len(routes) != 0 {
				t.Fatalf("routed %v", routes)
			}
			if d := fk.netif.Dump(); !strings.Contains(d, "10.96.0.10/32") {
				t.Fatalf("cluster IP not bound:\n%s", d)
			}
		})
	}
}

func TestDualStackRangesNeedNoIPv6Anchor(t *testing.T) {
	fk := newFakeKernel()
	cfg := routedConfig()
	cfg.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	cfg.ServiceCIDRs = append(cfg.ServiceCIDRs, netip.MustParsePrefix("fd00:96::/112"))
	p, _ := newTestProxier(t, fk, cfg)
	svc := servicetest.Service("web", "fd00:96::10")
	svc.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:96::10"}
	p.Tracker().SetService(svc)
	mustSync(t, p)
	want := "dummy kube-ipvs0\n  10.96.0.0/32\n  route local 10.96.0.0/16\n  route local fd00:96::/112\n"
	if d := fk.netif.Dump(); !strings.HasPrefix(d, want) {
		t.Fatalf("kube-ipvs0:\n%s\nwant\n%s", d, want)
	}
	if d := fk.ipset.Dump(); !strings.Contains(d, "set KUBE-6-SERVICE-CIDRS hash:net inet6\n  fd00:96::/112\n") {
		t.Fatalf("ipsets:\n%s", d)
	}
}

// A Service CIDR route the kernel refuses is one failing object of the
// reconciler (kind route): the range's cluster IPs stay bound meanwhile,
// partial syncs go on without it, and when its backoff ends a full sync
// retries it and, once it is in place, unbinds the cluster IPs.
func TestFailedServiceRouteKeepsClusterIPsBoundUntilItsRetry(t *testing.T) {
	fk := newFakeKernel()
	f := &faults{}
	f.set(func(op, _ string) error {
		if op == "route-add" {
			return errors.New("netlink: invalid argument")
		}
		return nil
	})
	p, err := New(routedConfig(), servicetest.ThisNode, fk.faultyKernel(f), nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Tracker().SetService(apiServerService())
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return now }
	clusterIP := netip.MustParseAddr("10.96.0.10")
	bound := func() bool {
		addrs, _ := fk.netif.DummyAddresses()
		return slices.Contains(addrs, clusterIP)
	}
	svc := servicetest.Service("web", clusterIP.String())
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	res := p.Sync()
	if res.WriteErrors[string(snapshot.ObjectRoute)] != 1 || !bound() {
		t.Fatalf("write errors %v, cluster IP bound %v: want one route error and the cluster IP bound", res.WriteErrors, bound())
	}
	st := p.ReconcileStatus()
	if len(st.Objects) != 1 || st.Objects[0].Kind != snapshot.ObjectRoute || st.Objects[0].State != snapshot.StateError || st.Objects[0].Object != "local route "+serviceRange.String()+" on kube-ipvs0" {
		t.Fatalf("status: %v", st.Objects)
	}
	// Before its backoff ends, a partial sync serves the change without it.
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1", "10.244.2.7@node2"))
	if res := p.Sync(); res.Full || res.WriteErrors[string(snapshot.ObjectRoute)] != 0 || !bound() {
		t.Fatalf("before the backoff ends: full=%v errors %v bound %v", res.Full, res.WriteErrors, bound())
	}
	f.set(nil)
	now = now.Add(retryMin)
	if res := p.Sync(); res.Err() != nil || !res.Full {
		t.Fatalf("retry: full=%v %v", res.Full, res.Err())
	}
	routes, _ := fk.netif.ServiceRoutes()
	if !slices.Equal(routes, []netip.Prefix{serviceRange}) || bound() {
		t.Fatalf("after the retry: routes %v, cluster IP bound %v", routes, bound())
	}
	if st := p.ReconcileStatus(); len(st.Objects) != 0 {
		t.Fatalf("status after the retry: %v", st.Objects)
	}
	if rss := realServers(t, fk, webVSFor(clusterIP.String())); len(rss) != 2 {
		t.Fatalf("real servers: %v", rss)
	}
}

// The ranges of the ServiceCIDR objects serve both uses of the Service
// ranges, as --service-cidrs does: routed local, and no external IP in them
// (externalips.go). A range added later refuses an external IP served
// before; its deletion serves it again.
func TestServiceCIDRObjectsGuardExternalIPs(t *testing.T) {
	fk := newFakeKernel()
	p, rec := newTestProxier(t, fk, testConfig())
	svc := servicetest.Service("web", "10.96.0.10", withExternalIPs("10.100.0.7"))
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	ext := webVSFor("10.100.0.7")
	if got := realServers(t, fk, ext); len(got) != 1 {
		t.Fatalf("external IP not served before the range: %v", got)
	}
	drainEvents(rec)
	cidr := &networking.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "second"}, Spec: networking.ServiceCIDRSpec{CIDRs: []string{"10.100.0.0/16"}}}
	p.Tracker().SetServiceCIDR(cidr)
	mustSync(t, p)
	if _, err := fk.ipvs.RealServers(ext); !errors.Is(err, ipvs.ErrNotFound) {
		t.Fatalf("external IP inside a ServiceCIDR object's range still served: %v", err)
	}
	if ev := drainEvents(rec); !strings.Contains(ev, "external IP 10.100.0.7 lies in the Service range 10.100.0.0/16") {
		t.Fatalf("events: %q", ev)
	}
	if routes, _ := fk.netif.ServiceRoutes(); !slices.Equal(routes, []netip.Prefix{netip.MustParsePrefix("10.100.0.0/16")}) {
		t.Fatalf("routes: %v", routes)
	}
	p.Tracker().DeleteServiceCIDR("second")
	mustSync(t, p)
	if got := realServers(t, fk, ext); len(got) != 1 {
		t.Fatalf("external IP not served again once the range is gone: %v", got)
	}
}

// Another owner's route to the range makes the kernel refuse ours without
// an error: the range is not ours to route, so its cluster IPs are bound one
// by one, each with its KUBE-IPVS-IPS member, in the sync that found it,
// and so are those of a Service added by a later partial sync.
func TestServiceCIDRHeldByAnotherRouteKeepsClusterIPsBound(t *testing.T) {
	fk := newFakeKernel()
	fk.netif.SetForeignRoute(serviceRange)
	p, err := New(routedConfig(), servicetest.ThisNode, fk.kernel(), nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Tracker().SetService(apiServerService())
	bound := func(ip string) bool {
		addrs, _ := fk.netif.DummyAddresses()
		members, _ := fk.ipset.Entries("KUBE-IPVS-IPS")
		a := netip.MustParseAddr(ip)
		return slices.Contains(addrs, a) && slices.Contains(members, ipset.Entry{IP: a})
	}
	web := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(web)
	p.Tracker().SetEndpointSlice(servicetest.Slice(web, "web-a", 8080, "10.244.1.5@node1"))
	if res := mustSync(t, p); !res.Full || !bound("10.96.0.10") {
		t.Fatalf("full=%v, cluster IP bound with its KUBE-IPVS-IPS member %v:\n%s", res.Full, bound("10.96.0.10"), fk.ipset.Dump())
	}
	if routes, _ := fk.netif.ServiceRoutes(); len(routes) != 0 {
		t.Fatalf("our routes: %v, want none", routes)
	}
	api := servicetest.Service("api", "10.96.0.20")
	p.Tracker().SetService(api)
	p.Tracker().SetEndpointSlice(servicetest.Slice(api, "api-a", 8080, "10.244.1.6@node1"))
	if res := mustSync(t, p); res.Full || !bound("10.96.0.20") || !bound("10.96.0.10") {
		t.Fatalf("partial sync: full=%v, bound %v %v", res.Full, bound("10.96.0.10"), bound("10.96.0.20"))
	}
}
