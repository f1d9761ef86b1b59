package proxier

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
)

// What a full sync compares (fullScope): every object of the view and of
// the desired state, each once, except those backing off.

// fullScopeProxier is a proxier on fk, whose writes go through f, with the
// Service web synced.
func fullScopeProxier(t *testing.T, fk *fakeKernel, f *faults, now *time.Time) *Proxier {
	t.Helper()
	p, err := New(testConfig(), servicetest.ThisNode, fk.faultyKernel(f), nil)
	if err != nil {
		t.Fatal(err)
	}
	p.now = func() time.Time { return *now }
	p.Tracker().SetService(apiServerService())
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	return p
}

// countWrites makes f fail every write op to object (a key's text) and
// counts them.
func countWrites(f *faults, op string, object ipvs.VirtualServerKey) *int {
	n := new(int)
	f.set(func(o, obj string) error {
		if o == op && obj == object.String() {
			*n++
			return errors.New("netlink: no buffer space")
		}
		return nil
	})
	return n
}

// A record nobody claims, without its virtual server (a crash between the
// two deletes), is removed by the next full sync.
func TestFullSyncRemovesARecordWithoutItsVirtualServer(t *testing.T) {
	fk, f, now := newFakeKernel(), &faults{}, time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	p := fullScopeProxier(t, fk, f, &now)
	gone := webVSFor("10.96.0.99")
	recordAsOurs(t, fk, gone)
	p.RequestFullSync()
	if res := mustSync(t, p); !res.Full {
		t.Fatal("not a full sync")
	}
	e := recordEntry(gone)
	entries, err := fk.ipset.Entries(e.Set)
	if err != nil {
		t.Fatal(err)
	}
	for _, have := range entries {
		if have == e.Entry {
			t.Fatalf("the record of %s is still there", gone)
		}
	}
	if len(entries) != 1 {
		t.Fatalf("records %v, want web's only", entries)
	}
}

// A virtual server whose write failed is not written by a full sync before
// its retry is due (one write per backoff), and is once it is.
func TestFullSyncLeavesAnObjectBackingOffAlone(t *testing.T) {
	fk, f, now := newFakeKernel(), &faults{}, time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	p := fullScopeProxier(t, fk, f, &now)
	adds := countWrites(f, "ipvs-add", webVS)
	if err := fk.ipvs.DeleteVirtualServer(webVS); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{1, 1, 2} {
		if i == 2 {
			now = now.Add(retryMin)
		}
		p.RequestFullSync()
		if res := p.Sync(); !res.Full || !res.Completed {
			t.Fatalf("sync %d: full=%v completed=%v", i, res.Full, res.Completed)
		}
		if *adds != want {
			t.Fatalf("after full sync %d: %d attempts to create %s, want %d", i, *adds, webVS, want)
		}
	}
}

// A virtual server nobody wants, held both by the view and by its record,
// is compared once per full sync: a delete that fails is tried once, and
// counted once.
func TestFullSyncComparesAnUnwantedVirtualServerOnce(t *testing.T) {
	fk, f, now := newFakeKernel(), &faults{}, time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	p := fullScopeProxier(t, fk, f, &now)
	deletes := countWrites(f, "ipvs-delete", webVS)
	p.Tracker().DeleteService("default", "web")
	if res := p.Sync(); res.Full || *deletes != 1 {
		t.Fatalf("partial sync: full=%v, %d deletes of %s", res.Full, *deletes, webVS)
	}
	now = now.Add(retryMin) // due: no longer backing off
	p.RequestFullSync()
	res := p.Sync()
	if !res.Full || *deletes != 2 {
		t.Fatalf("full sync: full=%v, %d deletes of %s in all, want 2", res.Full, *deletes, webVS)
	}
	if n := res.WriteErrors[string(snapshot.ObjectVirtualServer)]; n != 1 {
		t.Fatalf("full sync: %d ipvs write errors %v, want 1", n, res.WriteErrors)
	}
	if _, err := fk.ipvs.RealServers(webVS); err != nil {
		t.Fatalf("%s: %v", webVS, err)
	}
}

// A set member whose add failed, found in the kernel at the next full sync
// (added by someone else meanwhile), is settled by it: in step, no write,
// and no longer failing.
func TestFullSyncSettlesAFailedMemberFoundInStep(t *testing.T) {
	fk, f, now := newFakeKernel(), &faults{}, time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	p := fullScopeProxier(t, fk, f, &now)
	member := ipset.Entry{IP: netip.MustParseAddr("10.96.0.11"), Protocol: "tcp", Port: 80}
	f.set(func(op, obj string) error {
		if op == "ipset-add" && obj == owned.SetClusterIP+" "+member.String(owned.SetType(owned.SetClusterIP)) {
			return errors.New("netlink: no buffer space")
		}
		return nil
	})
	svc := servicetest.Service("api", "10.96.0.11")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "api-a", 8080, "10.244.1.6@node1"))
	if res := p.Sync(); res.FailingObjects[string(snapshot.ObjectSetEntry)] != 1 {
		t.Fatalf("failing %v, want the member", res.FailingObjects)
	}
	if err := fk.ipset.AddEntry(owned.SetClusterIP, member); err != nil {
		t.Fatal(err)
	}
	fullSyncSettlesAll(t, p, &now)
}

// A virtual server whose real server's add failed, found in step at the
// next full sync (the real server added by someone else meanwhile), is
// settled by it: the read finds it in step, and its status alone makes the
// writer look at it again.
func TestFullSyncSettlesAFailedVirtualServerFoundInStep(t *testing.T) {
	fk, f, now := newFakeKernel(), &faults{}, time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	p := fullScopeProxier(t, fk, f, &now)
	api := webVSFor("10.96.0.11")
	f.set(func(op, obj string) error {
		if op == "ipvs-add-rs" && obj == api.String() {
			return errors.New("netlink: no buffer space")
		}
		return nil
	})
	svc := servicetest.Service("api", "10.96.0.11")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "api-a", 8080, "10.244.1.6@node1"))
	if res := p.Sync(); res.FailingObjects[string(snapshot.ObjectVirtualServer)] != 1 {
		t.Fatalf("failing %v, want the virtual server", res.FailingObjects)
	}
	if err := fk.ipvs.AddRealServer(api, ipvs.RealServer{RealServerKey: ipvs.RealServerKey{Address: netip.MustParseAddr("10.244.1.6"), Port: 8080}, Weight: 1}); err != nil {
		t.Fatal(err)
	}
	fullSyncSettlesAll(t, p, &now)
}

// A virtual server whose scheduler someone else changed, its real servers
// untouched, is not in step: the full sync writes the scheduler back.
func TestFullSyncRestoresASchedulerChangedBehindItsBack(t *testing.T) {
	fk, f, now := newFakeKernel(), &faults{}, time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	p := fullScopeProxier(t, fk, f, &now)
	before := schedulerOf(t, fk, webVS)
	if err := fk.ipvs.UpdateVirtualServer(ipvs.VirtualServer{VirtualServerKey: webVS, Scheduler: "lc"}); err != nil {
		t.Fatal(err)
	}
	p.RequestFullSync()
	if res := mustSync(t, p); !res.Full || res.Writes != 1 {
		t.Fatalf("full=%v writes=%d, want a full sync writing the virtual server", res.Full, res.Writes)
	}
	if after := schedulerOf(t, fk, webVS); after != before {
		t.Fatalf("scheduler %q, want %q back", after, before)
	}
}

func schedulerOf(t *testing.T, fk *fakeKernel, k ipvs.VirtualServerKey) string {
	t.Helper()
	all, err := fk.ipvs.VirtualServers()
	if err != nil {
		t.Fatal(err)
	}
	for _, vs := range all {
		if vs.VirtualServerKey == k {
			return vs.Scheduler
		}
	}
	t.Fatalf("%s is not in the kernel", k)
	return ""
}

// fullSyncSettlesAll: once the retries are due, a full sync finds the
// kernel in step, writes nothing and leaves no object pending or failing.
func fullSyncSettlesAll(t *testing.T, p *Proxier, now *time.Time) {
	t.Helper()
	*now = now.Add(retryMin)
	p.RequestFullSync()
	res := p.Sync()
	if !res.Full || res.Writes != 0 || len(res.FailingObjects) != 0 {
		t.Fatalf("full=%v writes=%d failing=%v, want a full sync with nothing to write or failing", res.Full, res.Writes, res.FailingObjects)
	}
	if st := p.ReconcileStatus(); len(st.Objects) != 0 {
		t.Fatalf("status %+v", st.Objects)
	}
}

// Each full read starts from an empty view (its maps recycled from the
// last one's): a member and an address removed behind the proxier's back
// are missing from it, and written again.
func TestFullSyncRestoresAMemberAndAnAddressRemovedBehindItsBack(t *testing.T) {
	fk, f, now := newFakeKernel(), &faults{}, time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	p := fullScopeProxier(t, fk, f, &now)
	member := ipset.Entry{IP: netip.MustParseAddr("10.96.0.10"), Protocol: "tcp", Port: 80}
	if err := fk.ipset.DeleteEntry(owned.SetClusterIP, member); err != nil {
		t.Fatal(err)
	}
	external := netip.MustParseAddr("203.0.113.10")
	svc := servicetest.Service("web", "10.96.0.10", func(s *v1.Service) { s.Spec.ExternalIPs = []string{external.String()} })
	p.Tracker().SetService(svc)
	mustSync(t, p) // binds the external IP
	if err := fk.netif.DeleteDummyAddress(external); err != nil {
		t.Fatal(err)
	}
	p.RequestFullSync()
	if res := mustSync(t, p); !res.Full || res.Writes != 2 {
		t.Fatalf("full=%v writes=%d, want a full sync writing the member and the address", res.Full, res.Writes)
	}
	entries, err := fk.ipset.Entries(owned.SetClusterIP)
	if err != nil || !slices.Contains(entries, member) {
		t.Fatalf("%s holds %v (%v), want %v", owned.SetClusterIP, entries, err, member)
	}
	if bound, err := fk.netif.DummyAddresses(); err != nil || !slices.Contains(bound, external) {
		t.Fatalf("bound %v (%v), want %s", bound, err, external)
	}
}

// The room a view's maps took is taken again by the next read only for at
// least half as many entries: a cluster that shrank does not keep the room
// of its largest size.
func TestRecycledViewRoomFollowsTheClusterSize(t *testing.T) {
	v := &kernelView{virtualServers: map[ipvs.VirtualServerKey]*kernelVirtualServer{}, addresses: map[netip.Addr]bool{},
		sets: map[string]*ipset.EntryMap[struct{}]{owned.SetClusterIP: ipset.NewEntryMap[struct{}](0)}}
	for i := range 100 {
		a := netip.AddrFrom4([4]byte{10, 96, 0, byte(i)})
		v.virtualServers[webVSFor(a.String())] = &kernelVirtualServer{}
		v.addresses[a] = true
		v.sets[owned.SetClusterIP].Put(ipset.Entry{IP: a, Protocol: "tcp", Port: 80}, struct{}{})
	}
	r := v.recycle()
	if len(r.virtualServers)+len(r.addresses)+r.sets[owned.SetClusterIP].Len() != 0 {
		t.Fatal("recycled maps are not empty")
	}
	same := func(a, b any) bool { return fmt.Sprintf("%p", a) == fmt.Sprintf("%p", b) }
	if !same(r.virtualServersFor(50), r.virtualServers) || !same(r.addressesFor(80), r.addresses) || r.setFor(owned.SetClusterIP, 100) != r.sets[owned.SetClusterIP] {
		t.Error("room for as many entries, or half, was not taken again")
	}
	if same(r.virtualServersFor(49), r.virtualServers) || same(r.addressesFor(1), r.addresses) || r.setFor(owned.SetClusterIP, 10) == r.sets[owned.SetClusterIP] {
		t.Error("room for more than twice as many entries was taken again")
	}
	if r.setFor(owned.SetExternalIP, 10) == nil || (recycledView{}).virtualServersFor(10) == nil {
		t.Error("no room where none was recycled")
	}
}

// A full sync's build records only the objects with a status
// (Touched.Only), but those it does: a virtual server backing off whose
// Service changed is written by the next full sync at once, as by a
// partial one, not when its retry comes.
func TestFullSyncWritesABackingOffObjectWhoseServiceChanged(t *testing.T) {
	fk, f, now := newFakeKernel(), &faults{}, time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	p := fullScopeProxier(t, fk, f, &now)
	adds := countWrites(f, "ipvs-add", webVS)
	if err := fk.ipvs.DeleteVirtualServer(webVS); err != nil {
		t.Fatal(err)
	}
	p.RequestFullSync()
	if res := p.Sync(); !res.Full || *adds != 1 {
		t.Fatalf("full=%v, %d attempts to create %s, want 1", res.Full, *adds, webVS)
	}
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1", "10.244.1.6@node1"))
	p.RequestFullSync()
	if res := p.Sync(); !res.Full || *adds != 2 {
		t.Fatalf("after web's endpoints changed: full=%v, %d attempts to create %s, want 2 (before its retry is due)", res.Full, *adds, webVS)
	}
}

// A full read keeps the desired state's list of real servers for a virtual
// server the kernel holds exactly as wanted, and lets go of what it read at
// once, before the writer loop compares it; one that differs is kept as
// read.
func TestFullReadSharesTheDesiredRealServersItFindsInStep(t *testing.T) {
	fk, f, now := newFakeKernel(), &faults{}, time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	p := fullScopeProxier(t, fk, f, &now)
	evidence := func() serviceEvidence { return evidenceOf(p.tracker.CurrentServices()) }
	read := func() *kernelView {
		t.Helper()
		v, err := readKernel(p.kernel, p.cfg, p.desired, evidence, nil, recycledView{})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if kv := read().virtualServers[webVS]; kv == nil || !kv.shared() {
		t.Fatalf("%s in step: read as %+v, want the desired list shared", webVS, kv)
	}
	rss, err := fk.ipvs.RealServers(webVS)
	if err != nil || len(rss) == 0 {
		t.Fatalf("real servers of %s: %v %v", webVS, rss, err)
	}
	if err := fk.ipvs.DeleteRealServer(webVS, rss[0].RealServerKey); err != nil {
		t.Fatal(err)
	}
	if kv := read().virtualServers[webVS]; kv == nil || kv.shared() || kv.realServerCount() != len(rss)-1 {
		t.Fatalf("%s with a real server removed behind its back: read as %+v, want its own list of %d", webVS, kv, len(rss)-1)
	}
}

// A full read lends one slice to every virtual server's listing: each that
// differs from the desired state must keep a list of its own, or the next
// listing would overwrite it and the writer loop compare the wrong servers.
func TestFullSyncRestoresTwoVirtualServersChangedDifferently(t *testing.T) {
	fk, f, now := newFakeKernel(), &faults{}, time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	p := fullScopeProxier(t, fk, f, &now)
	api := servicetest.Service("api", "10.96.0.11")
	p.Tracker().SetService(api)
	p.Tracker().SetEndpointSlice(servicetest.Slice(api, "api-a", 8080, "10.244.1.7@node1", "10.244.1.8@node1", "10.244.1.9@node1"))
	mustSync(t, p)
	want := fk.ipvs.Dump()
	webRSS, err := fk.ipvs.RealServers(webVS)
	if err != nil || len(webRSS) != 1 {
		t.Fatalf("real servers of %s: %v %v", webVS, webRSS, err)
	}
	apiVS := webVSFor("10.96.0.11")
	apiRSS, err := fk.ipvs.RealServers(apiVS)
	if err != nil || len(apiRSS) != 3 {
		t.Fatalf("real servers of %s: %v %v", apiVS, apiRSS, err)
	}
	// web (listed first) gains a second real server; api loses its first.
	extra := ipvs.RealServer{RealServerKey: ipvs.RealServerKey{Address: netip.MustParseAddr("10.244.1.6"), Port: 8080}, Weight: 1}
	if err := fk.ipvs.AddRealServer(webVS, extra); err != nil {
		t.Fatal(err)
	}
	if err := fk.ipvs.DeleteRealServer(apiVS, apiRSS[0].RealServerKey); err != nil {
		t.Fatal(err)
	}
	p.RequestFullSync()
	if res := mustSync(t, p); !res.Full || res.Writes != 2 {
		t.Fatalf("full=%v writes=%d, want a full sync removing one real server and adding one", res.Full, res.Writes)
	}
	if got := fk.ipvs.Dump(); got != want {
		t.Fatalf("after the full sync:\n%s\nwant\n%s", got, want)
	}
}
