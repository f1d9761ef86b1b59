package proxier

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	v1 "k8s.io/api/core/v1"
)

// failingConntrack fails every delete while failures > 0, as a kernel that
// refuses the delete (ENOMEM, a netlink buffer overrun) does.
type failingConntrack struct {
	*conntrack.Fake
	failures int
}

var errConntrackRefused = errors.New("injected: conntrack delete refused")

func (f *failingConntrack) DeleteFlows(filters ...conntrack.Filter) (int, error) {
	if f.failures > 0 {
		f.failures--
		return 0, errConntrackRefused
	}
	return f.Fake.DeleteFlows(filters...)
}

func (f *failingConntrack) DeleteFlowsMatching(family int, protocol uint8, stale func(conntrack.Flow) bool) (int, error) {
	if f.failures > 0 {
		f.failures--
		return 0, errConntrackRefused
	}
	return f.Fake.DeleteFlowsMatching(family, protocol, stale)
}

func udpFlowTo(src, dst, replySrc string) conntrack.Flow {
	s := netip.MustParseAddrPort(src)
	return conntrack.Flow{Protocol: conntrack.UDP, OrigSrc: s, OrigDst: netip.MustParseAddrPort(dst),
		ReplySrc: netip.MustParseAddrPort(replySrc), ReplyDst: s}
}

func addFlows(t *testing.T, table *conntrack.Fake, flows ...conntrack.Flow) {
	t.Helper()
	for _, f := range flows {
		if err := table.AddFlow(f); err != nil {
			t.Fatal(err)
		}
	}
}

func flowsLeft(t *testing.T, table conntrack.Interface) []conntrack.Flow {
	t.Helper()
	left, err := table.Flows(4)
	if err != nil {
		t.Fatal(err)
	}
	return left
}

// A failed delete of a removed endpoint's flows is retried: today the flows
// stay until the client stops sending, since no later sync sees a change.
func TestConntrackFailedDeleteIsRetried(t *testing.T) {
	fk := newFakeKernel()
	table := &failingConntrack{Fake: fk.conntrack}
	k := fk.kernel()
	k.Conntrack = table
	p, err := New(testConfig(), servicetest.ThisNode, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := servicetest.Service("dns", "10.96.0.53", servicetest.Protocol(v1.ProtocolUDP))
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "dns-a", 53, "10.244.1.5@node1", "10.244.2.7@node2"))
	mustSync(t, p)
	live := udpFlowTo("10.244.3.8:40000", "10.96.0.53:80", "10.244.1.5:53")
	stale := udpFlowTo("10.244.3.9:40000", "10.96.0.53:80", "10.244.2.7:53")
	addFlows(t, fk.conntrack, live, stale)

	// 10.244.2.7 goes away; every conntrack delete of this sync fails.
	table.failures = 2
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "dns-a", 53, "10.244.1.5@node1"))
	if res := p.Sync(); res.WriteErrors["conntrack"] == 0 {
		t.Fatalf("sync with refused deletes reported no conntrack failure: %+v", res.WriteErrors)
	}
	if left := flowsLeft(t, fk.conntrack); len(left) != 2 {
		t.Fatalf("flows after the failed sync = %v, want both still there", left)
	}
	// The next sync, with nothing changed, retries.
	res := mustSync(t, p)
	if left := flowsLeft(t, fk.conntrack); res.ConntrackDeleted != 1 || !slices.Equal(left, []conntrack.Flow{live}) {
		t.Fatalf("after the retry: deleted %d, left %v; want only %s", res.ConntrackDeleted, left, live)
	}
}

// Flows created while a UDP Service had no endpoints are flushed by the
// first sync after a restart if endpoints appeared while the daemon was
// down; a restart otherwise flushes nothing live.
func TestConntrackEndpointsThatAppearedWhileDown(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	svc := servicetest.Service("dns", "10.96.0.53", servicetest.Protocol(v1.ProtocolUDP))
	p.Tracker().SetService(svc)
	mustSync(t, p)
	// A client sends to the Service while it has no endpoint: the flow is
	// answered by nobody, its reply source the virtual server itself.
	blackholed := udpFlowTo("10.244.3.8:40000", "10.96.0.53:80", "10.96.0.53:80")
	addFlows(t, fk.conntrack, blackholed)

	// Restart; meanwhile the Service got an endpoint.
	p2, _ := newTestProxier(t, fk, testConfig())
	p2.Tracker().SetService(svc)
	p2.Tracker().SetEndpointSlice(servicetest.Slice(svc, "dns-a", 53, "10.244.1.5@node1"))
	res := mustSync(t, p2)
	if left := flowsLeft(t, fk.conntrack); res.ConntrackDeleted != 1 || len(left) != 0 {
		t.Fatalf("after restart: deleted %d, left %v; want the blackholed flow gone", res.ConntrackDeleted, left)
	}
}

// The periodic full sync deletes exactly the UDP flows to a Service address
// and port whose reply source is not one of its real servers, whatever
// events were missed; nothing else in the table is touched.
func TestConntrackReconcileDeletesExactlyStaleServiceFlows(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	dns := servicetest.Service("dns", "10.96.0.53", servicetest.Protocol(v1.ProtocolUDP), servicetest.NodePort(30053))
	empty := servicetest.Service("empty", "10.96.0.54", servicetest.Protocol(v1.ProtocolUDP))
	web := servicetest.Service("web", "10.96.0.80")
	for _, s := range []*v1.Service{dns, empty, web} {
		p.Tracker().SetService(s)
	}
	p.Tracker().SetEndpointSlice(servicetest.Slice(dns, "dns-a", 53, "10.244.1.5@node1"))
	p.Tracker().SetEndpointSlice(servicetest.Slice(web, "web-a", 8080, "10.244.1.6@node1"))
	mustSync(t, p)

	staleClusterIP := udpFlowTo("10.244.3.1:40000", "10.96.0.53:80", "10.244.9.9:53")
	staleNodePort := udpFlowTo("192.0.2.7:40000", "198.51.100.1:30053", "10.244.9.9:53")
	keep := []conntrack.Flow{
		udpFlowTo("10.244.3.2:40000", "10.96.0.53:80", "10.244.1.5:53"),      // its real server
		udpFlowTo("192.0.2.7:40001", "198.51.100.1:30053", "10.244.1.5:53"),  // node port, its real server
		udpFlowTo("10.244.3.3:40000", "10.96.0.53:81", "10.244.9.9:53"),      // not a port of the Service
		udpFlowTo("10.244.3.4:40000", "10.96.0.54:80", "10.96.0.54:80"),      // a Service with no endpoint yet
		udpFlowTo("10.244.3.5:40000", "192.0.2.100:53", "192.0.2.100:53"),    // not a Service address
		udpFlowTo("10.244.3.6:40000", "198.51.100.1:31999", "10.244.9.9:53"), // no such node port
		{Protocol: conntrack.TCP, OrigSrc: netip.MustParseAddrPort("10.244.3.7:40000"), OrigDst: netip.MustParseAddrPort("10.96.0.80:80"),
			ReplySrc: netip.MustParseAddrPort("10.244.9.9:8080"), ReplyDst: netip.MustParseAddrPort("10.244.3.7:40000")}, // TCP
	}
	addFlows(t, fk.conntrack, append([]conntrack.Flow{staleClusterIP, staleNodePort}, keep...)...)

	// A partial sync with no change leaves the table alone...
	if res := mustSync(t, p); res.ConntrackDeleted != 0 {
		t.Fatalf("a partial sync without change deleted %d flows", res.ConntrackDeleted)
	}
	// ...the periodic full sync reconciles it.
	p.needFull = true
	res := mustSync(t, p)
	left := flowsLeft(t, fk.conntrack)
	want := append([]conntrack.Flow(nil), keep...)
	slices.SortFunc(want, func(a, b conntrack.Flow) int { return cmpFlow(a, b) })
	slices.SortFunc(left, func(a, b conntrack.Flow) int { return cmpFlow(a, b) })
	if res.ConntrackDeleted != 2 || !slices.Equal(left, want) {
		t.Fatalf("full sync deleted %d, left\n%s\nwant %d deleted, left\n%s", res.ConntrackDeleted, left, 2, want)
	}
}

func cmpFlow(a, b conntrack.Flow) int {
	if a.String() < b.String() {
		return -1
	}
	if a.String() > b.String() {
		return 1
	}
	return 0
}
