package proxier

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	v1 "k8s.io/api/core/v1"
)

// A Service list without default/kubernetes (the wrong cluster, an etcd
// restored empty) removes nothing from the kernel: every virtual server,
// address and set member stays, the hold is reported in the result and the
// status, and a Service added meanwhile is still programmed. When
// default/kubernetes returns the held deletions go through in that sync.
func TestEmptyServiceListHoldsDeletionsUntilTheAPIServerServiceReturns(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	clock := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return clock }
	web := servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080))
	dns := servicetest.Service("dns", "10.96.0.20", servicetest.Protocol(v1.ProtocolUDP))
	for _, svc := range []*v1.Service{web, dns} {
		p.Tracker().SetService(svc)
		p.Tracker().SetEndpointSlice(servicetest.Slice(svc, svc.Name+"-a", 8080, "10.244.1.5@node1", "10.244.2.7@node2"))
	}
	if res := mustSync(t, p); res.DeletionsHeld || res.HeldDeletions != 0 {
		t.Fatalf("deletions held with default/kubernetes present: %+v", res)
	}
	before := kernelDump(fk)
	if !strings.Contains(before, "10.96.0.10") || !strings.Contains(before, "30080") {
		t.Fatalf("web not programmed:\n%s", before)
	}

	// The relist returns nothing at all.
	for _, svc := range []*v1.Service{web, dns, apiServerService()} {
		p.Tracker().DeleteService(svc.Namespace, svc.Name)
	}
	clock = clock.Add(time.Second)
	held := mustSync(t, p)
	if after := kernelDump(fk); after != before {
		t.Fatalf("the kernel changed without default/kubernetes:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if !held.DeletionsHeld || held.HeldDeletions == 0 {
		t.Fatalf("result DeletionsHeld=%v HeldDeletions=%d, want the hold reported", held.DeletionsHeld, held.HeldDeletions)
	}
	st := p.Status()
	if !st.DeletionsHeldSince.Equal(clock) {
		t.Errorf("status DeletionsHeldSince %v, want %v", st.DeletionsHeldSince, clock)
	}
	pending := 0
	for _, o := range st.Objects {
		if o.State == snapshot.StatePending && strings.Contains(o.LastError, "default/kubernetes is absent") {
			pending++
		}
	}
	if pending != held.HeldDeletions {
		t.Errorf("%d objects pending for the hold in the status, the result says %d: %+v", pending, held.HeldDeletions, st.Objects)
	}
	// A periodic full sync while held deletes nothing either.
	p.RequestFullSync()
	clock = clock.Add(30 * time.Second)
	if res := mustSync(t, p); !res.Full || kernelDump(fk) != before {
		t.Fatalf("full sync while held (full=%v) changed the kernel:\n%s", res.Full, kernelDump(fk))
	}

	// Adds still go.
	api := servicetest.Service("api", "10.96.0.30")
	p.Tracker().SetService(api)
	p.Tracker().SetEndpointSlice(servicetest.Slice(api, "api-a", 8080, "10.244.1.9@node1"))
	clock = clock.Add(time.Second)
	mustSync(t, p)
	if got := vsDump(fk, ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("10.96.0.30"), Port: 80}); !strings.Contains(got, "10.244.1.9:8080") {
		t.Fatalf("a Service added while deletions are held was not programmed: %q", got)
	}

	// default/kubernetes is back: web and dns go, api stays.
	p.Tracker().SetService(apiServerService())
	clock = clock.Add(time.Second)
	back := mustSync(t, p)
	if back.DeletionsHeld || back.HeldDeletions != 0 || !back.Full {
		t.Fatalf("after default/kubernetes returned: DeletionsHeld=%v HeldDeletions=%d full=%v, want a full sync without hold", back.DeletionsHeld, back.HeldDeletions, back.Full)
	}
	dump := kernelDump(fk)
	for _, gone := range []string{"10.96.0.10", "10.96.0.20", "30080"} {
		if strings.Contains(dump, gone) {
			t.Errorf("%s left after the hold ended:\n%s", gone, dump)
		}
	}
	if !strings.Contains(dump, "10.96.0.30") {
		t.Errorf("api removed:\n%s", dump)
	}
	if st := p.Status(); !st.DeletionsHeldSince.IsZero() || len(st.Objects) != 0 {
		t.Errorf("status after the hold: since %v, objects %+v", st.DeletionsHeldSince, st.Objects)
	}
}

// A proxier that starts on a node programmed by its predecessor and sees no
// default/kubernetes at its first sync adopts the kernel state and removes
// nothing, until default/kubernetes appears.
func TestFirstSyncWithoutTheAPIServerServiceRemovesNothing(t *testing.T) {
	fk := newFakeKernel()
	old, _ := newTestProxier(t, fk, testConfig())
	web := servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080))
	old.Tracker().SetService(web)
	old.Tracker().SetEndpointSlice(servicetest.Slice(web, "web-a", 8080, "10.244.1.5@node1"))
	mustSync(t, old)
	before := kernelDump(fk)

	// The restarted daemon lists an empty cluster.
	p, err := New(testConfig(), servicetest.ThisNode, fk.kernel(), nil)
	if err != nil {
		t.Fatal(err)
	}
	res := mustSync(t, p)
	if after := kernelDump(fk); after != before {
		t.Fatalf("the first sync of an empty list changed the kernel:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if !res.DeletionsHeld || res.HeldDeletions == 0 {
		t.Fatalf("DeletionsHeld=%v HeldDeletions=%d, want the hold reported", res.DeletionsHeld, res.HeldDeletions)
	}

	p.Tracker().SetService(apiServerService())
	mustSync(t, p)
	if dump := kernelDump(fk); strings.Contains(dump, "10.96.0.10") || strings.Contains(dump, "30080") {
		t.Fatalf("web's objects left once default/kubernetes is listed:\n%s", dump)
	}
}
