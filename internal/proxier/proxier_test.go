package proxier

import (
	"errors"
	"github.com/ipvsproxy/ipvsproxy/internal/cleanup"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

var (
	webVS = ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("10.96.0.10"), Port: 80}
	ep1   = ipvs.RealServerKey{Address: netip.MustParseAddr("10.244.1.5"), Port: 8080}
	ep2   = ipvs.RealServerKey{Address: netip.MustParseAddr("10.244.2.7"), Port: 8080}
)

func realServers(t *testing.T, fk *fakeKernel, k ipvs.VirtualServerKey) map[ipvs.RealServerKey]int32 {
	t.Helper()
	rss, err := fk.ipvs.RealServers(k)
	if err != nil {
		t.Fatalf("real servers of %s: %v", k, err)
	}
	out := map[ipvs.RealServerKey]int32{}
	for _, rs := range rss {
		out[rs.RealServerKey] = rs.Weight
	}
	return out
}

func TestSyncProgramsKernelAndRestartRewritesNothing(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	svc := servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080))
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1", "10.244.2.7@node2"))
	res := mustSync(t, p)
	if !res.Full || res.Writes == 0 {
		t.Fatalf("first sync: full=%v writes=%d", res.Full, res.Writes)
	}
	if got := realServers(t, fk, webVS); len(got) != 2 || got[ep1] != 1 || got[ep2] != 1 {
		t.Fatalf("real servers %v", got)
	}
	nodePortVS := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: servicetest.Node1IP, Port: 30080}
	if got := realServers(t, fk, nodePortVS); len(got) != 2 {
		t.Fatalf("node port real servers %v", got)
	}
	if dump := fk.netif.Dump(); !strings.Contains(dump, "10.96.0.10") {
		t.Fatalf("cluster IP not bound:\n%s", dump)
	}
	if dump := fk.ipt4.Dump(); !strings.Contains(dump, "-A KUBE-SERVICES ! -s 10.244.0.0/16 -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ") ||
		!strings.Contains(dump, "-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES") {
		t.Fatalf("iptables:\n%s", dump)
	}
	kernelBefore := fk.ipvs.Dump() + fk.netif.Dump() + fk.ipset.Dump() + fk.ipt4.Dump()

	// A full sync of the same world writes nothing.
	writes := fk.writes()
	p.needFull = true
	if res := mustSync(t, p); res.Writes != 0 || fk.writes() != writes {
		t.Fatalf("full resync wrote %d (fakes counted %d)", res.Writes, fk.writes()-writes)
	}

	// A restarted daemon adopts the kernel and writes nothing either.
	p2, _ := newTestProxier(t, fk, testConfig())
	p2.Tracker().SetService(svc)
	p2.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1", "10.244.2.7@node2"))
	if res := mustSync(t, p2); res.Writes != 0 || fk.writes() != writes {
		t.Fatalf("restart wrote %d (fakes counted %d)", res.Writes, fk.writes()-writes)
	}
	if after := fk.ipvs.Dump() + fk.netif.Dump() + fk.ipset.Dump() + fk.ipt4.Dump(); after != kernelBefore {
		t.Fatalf("kernel changed across restart:\n%s\nvs\n%s", kernelBefore, after)
	}
}

func TestPartialSyncTouchesOnlyTheChange(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	for i, ip := range []string{"10.96.0.10", "10.96.0.11", "10.96.0.12"} {
		svc := servicetest.Service([]string{"web", "api", "db"}[i], ip)
		p.Tracker().SetService(svc)
		p.Tracker().SetEndpointSlice(servicetest.Slice(svc, svc.Name+"-a", 8080, "10.244.1.5@node1"))
	}
	mustSync(t, p)
	writes := fk.writes()
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1", "10.244.2.7@node2"))
	res := mustSync(t, p)
	if res.Full || res.Services != 1 {
		t.Fatalf("want a partial sync of 1 Service, got full=%v services=%d", res.Full, res.Services)
	}
	// One real server added, one hairpin member unchanged: exactly one write.
	if res.Writes != 1 || fk.writes()-writes != 1 {
		t.Fatalf("writes %d (fakes %d), want 1", res.Writes, fk.writes()-writes)
	}
}

func TestServiceDeletionRemovesEverythingItOwned(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	svc := servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140"))
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "lb-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	emptyIPVS, emptyAddrs := "", ""
	p.Tracker().DeleteService("default", "lb")
	p.Tracker().DeleteEndpointSlice(servicetest.Slice(svc, "lb-a", 8080))
	mustSync(t, p)
	if got := fk.ipvs.Dump(); got != emptyIPVS {
		t.Fatalf("virtual servers left:\n%s", got)
	}
	if got, _ := fk.netif.DummyAddresses(); len(got) != 0 {
		t.Fatalf("addresses left: %v %s", got, emptyAddrs)
	}
	if got := fk.ipset.Dump(); strings.Contains(got, "203.0.113.140") || strings.Contains(got, "10.96.0.20") {
		t.Fatalf("set members left:\n%s", got)
	}
}

// Without a local endpoint the LB keeps the cluster endpoints for in-cluster
// sources (the rules drop the rest: TestLocalPolicyWithoutLocalEndpoint...
// in corners_test.go); still no set marks its traffic for masquerade.
func TestLocalPolicyWithoutLocalEndpointHasClusterEndpointsAndNoMark(t *testing.T) {
	fk := newFakeKernel()
	var results []SyncResult
	p, _ := newTestProxier(t, fk, testConfig())
	p.OnSync = func(r SyncResult) { results = append(results, r) }
	svc := servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140"), servicetest.ExternalLocal(32122))
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "lb-a", 8080, "10.244.2.7@node2"))
	mustSync(t, p)
	lbVS := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("203.0.113.140"), Port: 80}
	if got := realServers(t, fk, lbVS); len(got) != 1 || got[ipvs.RealServerKey{Address: netip.MustParseAddr("10.244.2.7"), Port: 8080}] != 1 {
		t.Fatalf("LB virtual server on a node without local endpoints has %v, want the cluster endpoint", got)
	}
	if got := realServers(t, fk, webVSFor("10.96.0.20")); len(got) != 1 {
		t.Fatalf("cluster IP keeps cluster-wide endpoints, got %v", got)
	}
	if dump := fk.ipset.Dump(); strings.Contains(after(dump, "set KUBE-LOAD-BALANCER "), "203.0.113.140") || strings.Contains(after(dump, "set KUBE-NODE-PORT-TCP "), "30090") {
		t.Fatalf("Local-policy traffic must not be marked:\n%s", dump)
	}
	last := results[len(results)-1]
	name := svcName("lb")
	if last.HealthCheckNodePorts[name] != 32122 || last.LocalReadyEndpoints[name] != 0 || last.NoLocalEndpoints[ipvsproxy.NoLocalKey{Family: v1.IPv4Protocol, Policy: "external"}] != 1 {
		t.Fatalf("health: %+v %+v %+v", last.HealthCheckNodePorts, last.LocalReadyEndpoints, last.NoLocalEndpoints)
	}
	// An endpoint lands on this node: the LB serves it, health says 1.
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "lb-a", 8080, "10.244.2.7@node2", "10.244.1.5@node1"))
	mustSync(t, p)
	if got := realServers(t, fk, lbVS); len(got) != 1 || got[ep1] != 1 {
		t.Fatalf("LB real servers %v", got)
	}
	if last := results[len(results)-1]; last.LocalReadyEndpoints[name] != 1 {
		t.Fatalf("local ready endpoints %d", last.LocalReadyEndpoints[name])
	}
}

func TestGracefulTerminationOfTCPRealServer(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return now }
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1", "10.244.2.7@node2"))
	mustSync(t, p)
	if err := fk.ipvs.SetConnections(webVS, ep2, 3, 1); err != nil {
		t.Fatal(err)
	}
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	res := mustSync(t, p)
	if got := realServers(t, fk, webVS); got[ep2] != 0 || len(got) != 2 || res.Draining != 1 {
		t.Fatalf("want ep2 draining at weight 0, got %v draining=%d", got, res.Draining)
	}
	// Connections still open: it stays.
	mustSync(t, p)
	if got := realServers(t, fk, webVS); len(got) != 2 {
		t.Fatalf("deleted while connections remain: %v", got)
	}
	// Connections end: it goes at the next sync.
	if err := fk.ipvs.SetConnections(webVS, ep2, 0, 0); err != nil {
		t.Fatal(err)
	}
	res = mustSync(t, p)
	if got := realServers(t, fk, webVS); len(got) != 1 || res.Draining != 0 {
		t.Fatalf("want ep2 gone, got %v draining=%d", got, res.Draining)
	}
}

// Deleting a Service does not cut its established TCP connections
// (kubernetes#71894): the virtual server stays with its real servers at
// weight 0 until they end or the drain limit passes, then it goes.
func TestDeletedServiceDrainsEstablishedConnections(t *testing.T) {
	for _, tc := range []struct {
		name      string
		end       func(fk *fakeKernel, now *time.Time)
		wantAfter string
	}{
		{"connections close", func(fk *fakeKernel, _ *time.Time) { fk.ipvs.SetConnections(webVS, ep2, 0, 2) }, "gone once none is established"},
		{"limit passes", func(_ *fakeKernel, now *time.Time) { *now = now.Add(2 * time.Minute) }, "gone after the limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fk := newFakeKernel()
			cfg := testConfig()
			cfg.DrainTimeout = time.Minute
			p, _ := newTestProxier(t, fk, cfg)
			now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
			p.now = func() time.Time { return now }
			svc := servicetest.Service("web", "10.96.0.10")
			p.Tracker().SetService(svc)
			p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1", "10.244.2.7@node2"))
			mustSync(t, p)
			if err := fk.ipvs.SetConnections(webVS, ep2, 1, 0); err != nil {
				t.Fatal(err)
			}
			p.Tracker().DeleteService("default", "web")
			p.Tracker().DeleteEndpointSlice(servicetest.Slice(svc, "web-a", 8080))
			res := mustSync(t, p)
			// ep1 had no connection: gone; ep2 drains at weight 0.
			if got := realServers(t, fk, webVS); len(got) != 1 || got[ep2] != 0 || res.Draining != 1 {
				t.Fatalf("want only ep2 at weight 0, got %v draining=%d", got, res.Draining)
			}
			mustSync(t, p)
			if got := realServers(t, fk, webVS); len(got) != 1 {
				t.Fatalf("cut while its connection is open: %v", got)
			}
			tc.end(fk, &now)
			res = mustSync(t, p)
			if got := fk.ipvs.Dump(); strings.Contains(got, "10.96.0.10") || res.Draining != 0 {
				t.Fatalf("want the virtual server %s, left:\n%s draining=%d", tc.wantAfter, got, res.Draining)
			}
		})
	}
}

// Only established connections keep a deleted Service's virtual server:
// closing ones (TIME_WAIT after every short request) have nothing to carry.
func TestDeletedServiceWithOnlyClosingConnectionsGoesAtOnce(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	fk.ipvs.SetConnections(webVS, ep1, 0, 5)
	p.Tracker().DeleteService("default", "web")
	p.Tracker().DeleteEndpointSlice(servicetest.Slice(svc, "web-a", 8080))
	mustSync(t, p)
	if got := fk.ipvs.Dump(); strings.Contains(got, "10.96.0.10") {
		t.Fatalf("virtual server kept for closing connections:\n%s", got)
	}
}

// A drain limit of 0 cuts a deleted Service's connections at once.
func TestDeletedServiceWithoutDrainLimitGoesAtOnce(t *testing.T) {
	fk := newFakeKernel()
	cfg := testConfig()
	cfg.DrainTimeout = 0
	p, _ := newTestProxier(t, fk, cfg)
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	fk.ipvs.SetConnections(webVS, ep1, 1, 0)
	p.Tracker().DeleteService("default", "web")
	p.Tracker().DeleteEndpointSlice(servicetest.Slice(svc, "web-a", 8080))
	mustSync(t, p)
	if got := fk.ipvs.Dump(); strings.Contains(got, "10.96.0.10") {
		t.Fatalf("virtual server left:\n%s", got)
	}
}

func TestDrainingRealServerTimesOutAndComesBack(t *testing.T) {
	fk := newFakeKernel()
	cfg := testConfig()
	cfg.DrainTimeout = time.Minute
	p, _ := newTestProxier(t, fk, cfg)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return now }
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1", "10.244.2.7@node2"))
	mustSync(t, p)
	fk.ipvs.SetConnections(webVS, ep1, 1, 0)
	fk.ipvs.SetConnections(webVS, ep2, 1, 0)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080))
	mustSync(t, p)
	if got := realServers(t, fk, webVS); got[ep1] != 0 || got[ep2] != 0 {
		t.Fatalf("both should drain: %v", got)
	}
	// ep1 comes back before its time is up: weight 1 again, not deleted.
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	now = now.Add(2 * time.Minute)
	res := mustSync(t, p)
	if got := realServers(t, fk, webVS); len(got) != 1 || got[ep1] != 1 || res.Draining != 0 {
		t.Fatalf("want ep1 live and ep2 deleted after the timeout, got %v draining=%d", got, res.Draining)
	}
}

func TestUDPEndpointRemovalDeletesExactlyItsFlows(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	svc := servicetest.Service("dns", "10.96.0.53", servicetest.Protocol(v1.ProtocolUDP), servicetest.NodePort(30053))
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "dns-a", 53, "10.244.1.5@node1", "10.244.2.7@node2"))
	mustSync(t, p)
	client := netip.MustParseAddrPort("10.244.3.8:40000")
	outside := netip.MustParseAddrPort("203.0.113.9:40000")
	flow := func(src netip.AddrPort, dst, ep string) conntrack.Flow {
		e := netip.MustParseAddrPort(ep)
		return conntrack.Flow{Protocol: conntrack.UDP, OrigSrc: src, OrigDst: netip.MustParseAddrPort(dst), ReplySrc: e, ReplyDst: src}
	}
	flows := []conntrack.Flow{
		flow(client, "10.96.0.53:80", "10.244.2.7:53"),                                       // stale: via cluster IP
		flow(outside, "198.51.100.1:30053", "10.244.2.7:53"),                                 // stale: via node port
		flow(netip.MustParseAddrPort("10.244.3.9:40000"), "10.96.0.53:80", "10.244.1.5:53"),  // live endpoint: kept
		flow(netip.MustParseAddrPort("10.244.3.10:40000"), "10.96.0.99:80", "10.244.2.7:53"), // another Service: kept
		flow(netip.MustParseAddrPort("10.244.3.8:40001"), "10.244.2.7:53", "10.244.2.7:53"),  // direct to the pod: kept
	}
	for _, f := range flows {
		if err := fk.conntrack.AddFlow(f); err != nil {
			t.Fatal(err)
		}
	}
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "dns-a", 53, "10.244.1.5@node1"))
	res := mustSync(t, p)
	if res.ConntrackDeleted != 2 {
		t.Fatalf("deleted %d flows, want 2; left:\n%s", res.ConntrackDeleted, fk.conntrack.Dump())
	}
	left, _ := fk.conntrack.Flows(4)
	if len(left) != 3 {
		t.Fatalf("left %v", left)
	}
	for _, f := range left {
		if f.ReplySrc.Addr() == ep2.Address && f.OrigDst.Addr() != ep2.Address && f.OrigDst.Addr() != netip.MustParseAddr("10.96.0.99") {
			t.Fatalf("stale flow survived: %v", f)
		}
	}
}

func TestUDPServiceGainingEndpointsFlushesItsFlows(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	svc := servicetest.Service("dns", "10.96.0.53", servicetest.Protocol(v1.ProtocolUDP))
	p.Tracker().SetService(svc)
	mustSync(t, p)
	src := netip.MustParseAddrPort("10.244.3.8:40000")
	vip := netip.MustParseAddrPort("10.96.0.53:80")
	fk.conntrack.AddFlow(conntrack.Flow{Protocol: conntrack.UDP, OrigSrc: src, OrigDst: vip, ReplySrc: vip, ReplyDst: src})
	fk.conntrack.AddFlow(conntrack.Flow{Protocol: conntrack.UDP, OrigSrc: src, OrigDst: netip.MustParseAddrPort("10.96.0.54:80"), ReplySrc: netip.MustParseAddrPort("10.96.0.54:80"), ReplyDst: src})
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "dns-a", 53, "10.244.1.5@node1"))
	if res := mustSync(t, p); res.ConntrackDeleted != 1 {
		t.Fatalf("deleted %d, want 1:\n%s", res.ConntrackDeleted, fk.conntrack.Dump())
	}
}

func TestPortConflictOlderServiceWinsAndOthersKeepWorking(t *testing.T) {
	fk := newFakeKernel()
	p, rec := newTestProxier(t, fk, testConfig())
	ext := func(s *v1.Service) { s.Spec.ExternalIPs = []string{"203.0.113.5"} }
	older := servicetest.Service("older", "10.96.0.10", ext)
	newer := servicetest.Service("newer", "10.96.0.11", ext, servicetest.CreatedAt(servicetest.Created.Add(time.Hour)))
	for _, s := range []*v1.Service{newer, older} {
		p.Tracker().SetService(s)
	}
	p.Tracker().SetEndpointSlice(servicetest.Slice(older, "older-a", 8080, "10.244.1.5@node1"))
	p.Tracker().SetEndpointSlice(servicetest.Slice(newer, "newer-a", 8080, "10.244.2.7@node2"))
	mustSync(t, p)
	extVS := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("203.0.113.5"), Port: 80}
	if got := realServers(t, fk, extVS); len(got) != 1 || got[ep1] != 1 {
		t.Fatalf("the older Service should own %s: %v", extVS, got)
	}
	if got := realServers(t, fk, webVSFor("10.96.0.11")); len(got) != 1 || got[ep2] != 1 {
		t.Fatalf("the newer Service's cluster IP must keep working: %v", got)
	}
	if ev := drainEvents(rec); !strings.Contains(ev, "Warning PortConflict ExternalIP TCP 203.0.113.5:80 is already used by Service default/older") {
		t.Fatalf("events: %q", ev)
	}
	// The owner goes away: the other one takes the address over.
	p.Tracker().DeleteService("default", "older")
	mustSync(t, p)
	if got := realServers(t, fk, extVS); len(got) != 1 || got[ep2] != 1 {
		t.Fatalf("after the owner left: %v", got)
	}
}

func TestBadInputIsReportedOnceAndSkipped(t *testing.T) {
	fk := newFakeKernel()
	p, rec := newTestProxier(t, fk, testConfig())
	bad := servicetest.Service("bad", "not-an-ip")
	good := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(bad)
	p.Tracker().SetService(good)
	p.Tracker().SetEndpointSlice(servicetest.Slice(good, "web-a", 8080, "10.244.1.5@node1", "fd00::1@node1"))
	mustSync(t, p)
	ev := drainEvents(rec)
	if !strings.Contains(ev, `Warning InvalidService cluster IP "not-an-ip" is not an IP address`) || !strings.Contains(ev, "Warning InvalidEndpoint endpoint address fd00::1 is not IPv4") {
		t.Fatalf("events: %q", ev)
	}
	if got := realServers(t, fk, webVS); len(got) != 1 {
		t.Fatalf("good Service: %v", got)
	}
	p.needFull = true
	mustSync(t, p)
	if ev := drainEvents(rec); ev != "" {
		t.Fatalf("the same problems were reported again: %q", ev)
	}
}

func TestNeverTouchesWhatItDoesNotOwn(t *testing.T) {
	fk := newFakeKernel()
	cfg := testConfig()
	cfg.ExcludeCIDRs = []netip.Prefix{netip.MustParsePrefix("203.0.113.200/29")}
	// Someone else's virtual servers: on a node address outside the
	// NodePort range, on a foreign address, and on kube-ipvs0 but excluded.
	foreign := []ipvs.VirtualServerKey{
		{Protocol: ipvs.TCP, Address: servicetest.Node1IP, Port: 8443},
		{Protocol: ipvs.UDP, Address: netip.MustParseAddr("192.0.2.50"), Port: 53},
		{Protocol: ipvs.TCP, Address: netip.MustParseAddr("203.0.113.201"), Port: 80},
	}
	for _, k := range foreign {
		if err := fk.ipvs.AddVirtualServer(ipvs.VirtualServer{VirtualServerKey: k, Scheduler: "rr"}); err != nil {
			t.Fatal(err)
		}
	}
	fk.netif.EnsureDummy()
	fk.netif.AddDummyAddress(netip.MustParseAddr("203.0.113.201"))
	// A stale one of ours, left from an earlier run: recorded as ours.
	stale := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("10.96.9.9"), Port: 80}
	fk.netif.AddDummyAddress(stale.Address)
	fk.ipvs.AddVirtualServer(ipvs.VirtualServer{VirtualServerKey: stale, Scheduler: "rr"})
	recordAsOurs(t, fk, stale)

	p, _ := newTestProxier(t, fk, cfg)
	mustSync(t, p)
	for _, k := range foreign {
		if _, err := fk.ipvs.RealServers(k); err != nil {
			t.Fatalf("%s was removed: %v", k, err)
		}
	}
	if _, err := fk.ipvs.RealServers(stale); !errors.Is(err, ipvs.ErrNotFound) {
		t.Fatalf("our stale %s should be gone: %v", stale, err)
	}
	addrs, _ := fk.netif.DummyAddresses()
	if len(addrs) != 1 || addrs[0] != netip.MustParseAddr("203.0.113.201") {
		t.Fatalf("dummy addresses %v", addrs)
	}
	if err := cleanup.Installed(fk.kernel(), cfg.Families); err != nil {
		t.Fatal(err)
	}
	for _, k := range foreign {
		if _, err := fk.ipvs.RealServers(k); err != nil {
			t.Fatalf("cleanup removed %s: %v", k, err)
		}
	}
}

func TestFailedWriteIsRetriedAloneWithBackoff(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return now }
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	// Someone deletes our virtual server behind our back; the next partial
	// sync's write fails, and a partial retry after the backoff repairs it.
	if err := fk.ipvs.DeleteVirtualServer(webVS); err != nil {
		t.Fatal(err)
	}
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1", "10.244.2.7@node2"))
	res := p.Sync()
	if res.Err() == nil || res.WriteErrors[string(snapshot.ObjectVirtualServer)] == 0 || !res.Completed {
		t.Fatalf("want an ipvs write error in a completed sync, got %+v", res.WriteErrors)
	}
	if st := p.ReconcileStatus(); len(st.Objects) != 1 || st.Objects[0].State != snapshot.StateError || st.Objects[0].Object != "virtual server "+webVS.String() ||
		st.Objects[0].NextRetry != now.Add(retryMin) || len(st.Objects[0].Services) != 1 || st.Objects[0].Services[0] != "default/web" {
		t.Fatalf("status %+v", st.Objects)
	}
	// Before the backoff ends nothing is retried.
	if res := p.Sync(); res.Full || res.Writes != 0 {
		t.Fatalf("retried early: full=%v writes=%d", res.Full, res.Writes)
	}
	now = now.Add(retryMin)
	res = p.Sync()
	if res.Full || res.Err() != nil {
		t.Fatalf("retry: full=%v err=%v", res.Full, res.Err())
	}
	if got := realServers(t, fk, webVS); len(got) != 2 {
		t.Fatalf("after repair: %v", got)
	}
	if st := p.ReconcileStatus(); len(st.Objects) != 0 {
		t.Fatalf("status after repair %+v", st.Objects)
	}
}

// recordAsOurs writes k's ownership record, as an earlier run of the proxier
// would have.
func recordAsOurs(t *testing.T, fk *fakeKernel, k ipvs.VirtualServerKey) {
	t.Helper()
	e := recordEntry(k)
	if err := fk.ipset.CreateSet(ipset.Set{Name: e.Set, Type: ipset.HashIPPort, Family: ipset.IPv4}); err != nil && !errors.Is(err, ipset.ErrExists) {
		t.Fatal(err)
	}
	if err := fk.ipset.AddEntry(e.Set, e.Entry); err != nil {
		t.Fatal(err)
	}
}

func webVSFor(ip string) ipvs.VirtualServerKey {
	return ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr(ip), Port: 80}
}

func svcName(name string) (n types.NamespacedName) { n.Namespace, n.Name = "default", name; return }

func drainEvents(rec *record.FakeRecorder) string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

// A restart must not flush the flows of live UDP endpoints (every Service
// looks new to a fresh proxier), but flows of an endpoint that went away
// while the daemon was down are stale and go.
func TestRestartKeepsLiveUDPFlowsAndFlushesVanishedEndpoints(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	svc := servicetest.Service("dns", "10.96.0.53", servicetest.Protocol(v1.ProtocolUDP))
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "dns-a", 53, "10.244.1.5@node1", "10.244.2.7@node2"))
	mustSync(t, p)
	vip := netip.MustParseAddrPort("10.96.0.53:80")
	live := conntrack.Flow{Protocol: conntrack.UDP, OrigSrc: netip.MustParseAddrPort("10.244.3.8:40000"), OrigDst: vip,
		ReplySrc: netip.MustParseAddrPort("10.244.1.5:53"), ReplyDst: netip.MustParseAddrPort("10.244.3.8:40000")}
	gone := conntrack.Flow{Protocol: conntrack.UDP, OrigSrc: netip.MustParseAddrPort("10.244.3.9:40000"), OrigDst: vip,
		ReplySrc: netip.MustParseAddrPort("10.244.2.7:53"), ReplyDst: netip.MustParseAddrPort("10.244.3.9:40000")}
	for _, f := range []conntrack.Flow{live, gone} {
		if err := fk.conntrack.AddFlow(f); err != nil {
			t.Fatal(err)
		}
	}
	// The daemon restarts; meanwhile 10.244.2.7 was deleted.
	p2, _ := newTestProxier(t, fk, testConfig())
	p2.Tracker().SetService(svc)
	p2.Tracker().SetEndpointSlice(servicetest.Slice(svc, "dns-a", 53, "10.244.1.5@node1"))
	res := mustSync(t, p2)
	left, _ := fk.conntrack.Flows(4)
	if res.ConntrackDeleted != 1 || len(left) != 1 || left[0] != live {
		t.Fatalf("deleted %d, left %v; want only the live flow kept", res.ConntrackDeleted, left)
	}
}

// --ipvs-exclude-cidrs limits clean-up only, as in kube-proxy: a Service whose cluster IP lies in an excluded range still gets
// every virtual server (cluster IP, node port, load balancer) and keeps them
// up to date; what nobody wants there is never deleted, even once it was
// ours.
func TestExcludeCIDRsLimitCleanUpOnly(t *testing.T) {
	fk := newFakeKernel()
	cfg := testConfig()
	cfg.ExcludeCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.200.0/24"), netip.MustParsePrefix("203.0.113.200/29")}
	foreign := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("203.0.113.201"), Port: 80}
	foreignRS := ipvs.RealServer{RealServerKey: ipvs.RealServerKey{Address: netip.MustParseAddr("192.0.2.9"), Port: 80}, Weight: 3}
	fk.netif.EnsureDummy()
	fk.netif.AddDummyAddress(foreign.Address)
	if err := fk.ipvs.AddVirtualServer(ipvs.VirtualServer{VirtualServerKey: foreign, Scheduler: "rr"}); err != nil {
		t.Fatal(err)
	}
	if err := fk.ipvs.AddRealServer(foreign, foreignRS); err != nil {
		t.Fatal(err)
	}
	foreignBefore := fk.ipvs.Dump()

	p, _ := newTestProxier(t, fk, cfg)
	svc := servicetest.Service("excluded", "10.96.200.20", servicetest.LoadBalancer(30200, "203.0.113.150"))
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "excluded-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	clusterVS := webVSFor("10.96.200.20")
	nodePortVS := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: servicetest.Node1IP, Port: 30200}
	lbVS := webVSFor("203.0.113.150")
	for _, k := range []ipvs.VirtualServerKey{clusterVS, nodePortVS, lbVS} {
		if got := realServers(t, fk, k); len(got) != 1 || got[ep1] != 1 {
			t.Fatalf("%s: real servers %v, want %s", k, got, ep1)
		}
	}
	if got := realServers(t, fk, foreign); len(got) != 1 || got[foreignRS.RealServerKey] != 3 {
		t.Fatalf("the excluded foreign virtual server was changed: %v", got)
	}

	// A restart adopts the excluded cluster IP's virtual server and writes
	// nothing; an endpoint change then reaches it.
	writes := fk.writes()
	p2, _ := newTestProxier(t, fk, cfg)
	p2.Tracker().SetService(svc)
	p2.Tracker().SetEndpointSlice(servicetest.Slice(svc, "excluded-a", 8080, "10.244.1.5@node1"))
	if res := mustSync(t, p2); res.Writes != 0 || fk.writes() != writes {
		t.Fatalf("restart wrote %d", res.Writes)
	}
	p2.Tracker().SetEndpointSlice(servicetest.Slice(svc, "excluded-a", 8080, "10.244.1.5@node1", "10.244.2.7@node2"))
	mustSync(t, p2)
	if got := realServers(t, fk, clusterVS); len(got) != 2 {
		t.Fatalf("excluded cluster IP not kept up to date: %v", got)
	}

	// The Service goes: what lies outside the ranges goes with it; the
	// cluster IP's virtual server and address, inside, are never cleaned up.
	p2.Tracker().DeleteService("default", "excluded")
	p2.Tracker().DeleteEndpointSlice(servicetest.Slice(svc, "excluded-a", 8080))
	mustSync(t, p2)
	p2.needFull = true
	mustSync(t, p2)
	for _, k := range []ipvs.VirtualServerKey{nodePortVS, lbVS} {
		if _, err := fk.ipvs.RealServers(k); !errors.Is(err, ipvs.ErrNotFound) {
			t.Fatalf("%s should be gone with its Service: %v", k, err)
		}
	}
	if _, err := fk.ipvs.RealServers(clusterVS); err != nil {
		t.Fatalf("excluded %s was cleaned up: %v", clusterVS, err)
	}
	addrs, _ := fk.netif.DummyAddresses()
	if !slices.Contains(addrs, clusterVS.Address) || !slices.Contains(addrs, foreign.Address) || slices.Contains(addrs, lbVS.Address) {
		t.Fatalf("addresses on %s: %v", owned.DummyInterface, addrs)
	}
	if !strings.Contains(fk.ipvs.Dump(), strings.TrimSpace(foreignBefore)) {
		t.Fatalf("the foreign virtual server changed:\n%s\nwas\n%s", fk.ipvs.Dump(), foreignBefore)
	}
}

// The external IP guard (CVE-2020-8554) follows other Services: an
// external IP that later becomes another Service's cluster IP stops being
// served, even though its Service is the older one and would win the
// virtual server, and is served again when that Service goes. A Node's
// spec.podCIDRs refuse it too, as they change.
func TestExternalIPGuardFollowsOtherServices(t *testing.T) {
	fk := newFakeKernel()
	p, rec := newTestProxier(t, fk, testConfig())
	squat := servicetest.Service("squat", "10.96.0.30", func(s *v1.Service) { s.Spec.ExternalIPs = []string{"10.97.0.5"} })
	p.Tracker().SetService(squat)
	p.Tracker().SetEndpointSlice(servicetest.Slice(squat, "squat-a", 8080, "10.244.2.7@node2"))
	mustSync(t, p)
	shared := webVSFor("10.97.0.5")
	if got := realServers(t, fk, shared); len(got) != 1 || got[ep2] != 1 {
		t.Fatalf("external IP not served before any clash: %v", got)
	}
	drainEvents(rec)

	victim := servicetest.Service("victim", "10.97.0.5", servicetest.CreatedAt(servicetest.Created.Add(time.Hour)))
	p.Tracker().SetService(victim)
	p.Tracker().SetEndpointSlice(servicetest.Slice(victim, "victim-a", 8080, "10.244.1.5@node1"))
	if res := mustSync(t, p); res.Full {
		t.Fatal("want a partial sync")
	}
	if got := realServers(t, fk, shared); len(got) != 1 || got[ep1] != 1 {
		t.Fatalf("%s must serve victim's cluster IP, not squat's external IP: %v", shared, got)
	}
	if ev := drainEvents(rec); !strings.Contains(ev, "Warning ExternalIPRefused external IP 10.97.0.5 is the cluster IP of Service default/victim") {
		t.Fatalf("events: %q", ev)
	}
	if dump := fk.ipset.Dump(); strings.Contains(dump, "KUBE-EXTERNAL-IP 10.97.0.5") {
		t.Fatalf("the refused external IP is still marked:\n%s", dump)
	}

	p.Tracker().DeleteService("default", "victim")
	p.Tracker().DeleteEndpointSlice(servicetest.Slice(victim, "victim-a", 8080))
	mustSync(t, p)
	if got := realServers(t, fk, shared); len(got) != 1 || got[ep2] != 1 {
		t.Fatalf("external IP not served again once the cluster IP is gone: %v", got)
	}

	// The Node's pod range comes to cover it: refused at the next sync.
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: servicetest.ThisNode}, Spec: v1.NodeSpec{PodCIDRs: []string{"10.97.0.0/24"}}}
	p.Tracker().SetNode(node)
	mustSync(t, p)
	if _, err := fk.ipvs.RealServers(shared); !errors.Is(err, ipvs.ErrNotFound) {
		t.Fatalf("external IP inside the Node's pod CIDR still served: %v", err)
	}
	if ev := drainEvents(rec); !strings.Contains(ev, "external IP 10.97.0.5 lies in the pod range 10.97.0.0/24 of Node node1") {
		t.Fatalf("events: %q", ev)
	}
	if got := realServers(t, fk, webVSFor("10.96.0.30")); len(got) != 1 {
		t.Fatalf("the rest of the Service must keep working: %v", got)
	}
}

// An address written in status.loadBalancer outranks the same address a user
// wrote in spec.externalIPs, whatever their ages: the older externalIP
// Service loses the virtual server and gets the Event; the LoadBalancer's
// traffic goes to its own endpoints.
func TestLoadBalancerIngressOutranksAnOlderExternalIP(t *testing.T) {
	fk := newFakeKernel()
	p, rec := newTestProxier(t, fk, testConfig())
	squatter := servicetest.Service("squatter", "10.96.0.10", func(s *v1.Service) { s.Spec.ExternalIPs = []string{"203.0.113.20"} })
	lb := servicetest.Service("lb", "10.96.0.11", servicetest.LoadBalancer(30090, "203.0.113.20"), servicetest.CreatedAt(servicetest.Created.Add(time.Hour)))
	p.Tracker().SetService(squatter)
	p.Tracker().SetEndpointSlice(servicetest.Slice(squatter, "squatter-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	p.Tracker().SetService(lb)
	p.Tracker().SetEndpointSlice(servicetest.Slice(lb, "lb-a", 8080, "10.244.2.7@node2"))
	mustSync(t, p)
	lbVS := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("203.0.113.20"), Port: 80}
	if got := realServers(t, fk, lbVS); len(got) != 1 || got[ep2] != 1 {
		t.Fatalf("the LoadBalancer's ingress address must serve its own endpoints: %v", got)
	}
	if ev := drainEvents(rec); !strings.Contains(ev, "Warning PortConflict ExternalIP TCP 203.0.113.20:80 is already used by Service default/lb") {
		t.Fatalf("the externalIP side must get the Event: %q", ev)
	}
}
