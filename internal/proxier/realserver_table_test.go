package proxier

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"
)

// tableIPVS is the fake as the kernel's adapter looks to the full read: a
// RealServerTable. It counts the reads of one virtual server's real
// servers and of the table, and its table read can leave one virtual
// server out (moved by someone else's change while it was read) or fail
// after a number of them.
type tableIPVS struct {
	*ipvs.Fake
	perVirtualServer, tableReads int
	leaveOut                     ipvs.VirtualServerKey
	failAfter                    int    // virtual servers listed before failing; -1: never
	duringRead                   func() // once, while the next table read is under way
}

func (w *tableIPVS) ListedRealServers(k ipvs.VirtualServerKey, into []ipvs.RealServer) ([]ipvs.RealServer, error) {
	w.perVirtualServer++
	return w.Fake.ListedRealServers(k, into)
}

func (w *tableIPVS) RealServers(k ipvs.VirtualServerKey) ([]ipvs.RealServer, error) {
	w.perVirtualServer++
	return w.Fake.RealServers(k)
}

func (w *tableIPVS) EachRealServerList(fn func(ipvs.VirtualServerKey, []ipvs.RealServer) error) error {
	w.tableReads++
	if during := w.duringRead; during != nil {
		w.duringRead = nil
		during()
	}
	listed := 0
	return w.Fake.EachRealServerList(func(k ipvs.VirtualServerKey, rss []ipvs.RealServer) error {
		if k == w.leaveOut {
			return nil
		}
		if listed == w.failAfter {
			return errors.New("read the IPVS table: input/output error")
		}
		listed++
		return fn(k, rss)
	})
}

// tableFixture syncs 20 Services of three endpoints each through a
// tableIPVS, then changes two of them behind the proxier's back: a real
// server deleted from the first, another's weight set to 0 in the last.
func tableFixture(t *testing.T) (*Proxier, *tableIPVS, []ipvs.VirtualServerKey) {
	t.Helper()
	fk := newFakeKernel()
	w := &tableIPVS{Fake: fk.ipvs, failAfter: -1}
	k := fk.kernel()
	k.IPVS = w
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	p := proxierAt(t, k, &now)
	var keys []ipvs.VirtualServerKey
	for i := range 20 {
		ip := fmt.Sprintf("10.96.0.%d", 10+i)
		svc := servicetest.Service(fmt.Sprintf("web-%d", i), ip)
		p.Tracker().SetService(svc)
		p.Tracker().SetEndpointSlice(servicetest.Slice(svc, fmt.Sprintf("web-%d-a", i), 8080, "10.244.1.5@node1", "10.244.1.6@node1", "10.244.1.7@node1"))
		keys = append(keys, webVSFor(ip))
	}
	mustSync(t, p)
	ok := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	ok(w.Fake.DeleteRealServer(keys[0], ipvs.RealServerKey{Address: netip.MustParseAddr("10.244.1.6"), Port: 8080}))
	drained := ipvs.RealServer{RealServerKey: ipvs.RealServerKey{Address: netip.MustParseAddr("10.244.1.7"), Port: 8080}}
	ok(w.Fake.UpdateRealServer(keys[19], drained))
	w.perVirtualServer, w.tableReads = 0, 0
	p.RequestFullSync()
	return p, w, keys
}

// wantRepaired: every one of keys holds its three endpoints at weight 1.
func wantRepaired(t *testing.T, w *tableIPVS, keys []ipvs.VirtualServerKey) {
	t.Helper()
	for _, key := range keys {
		rss, err := w.Fake.RealServers(key)
		if err != nil {
			t.Fatal(err)
		}
		if len(rss) != 3 || slices.ContainsFunc(rss, func(rs ipvs.RealServer) bool { return rs.Weight != 1 }) {
			t.Fatalf("%s holds %v after the full re-check, want its three endpoints at weight 1", key, rss)
		}
	}
}

// The full re-check reads every real server from the table, none a
// virtual server at a time, and still finds what changed behind its back.
func TestFullReadTakesTheRealServersFromTheTable(t *testing.T) {
	p, w, keys := tableFixture(t)
	writes := w.Fake.Writes()
	if res := mustSync(t, p); !res.Full {
		t.Fatal("the requested sync was not full")
	}
	if n := w.Fake.Writes() - writes; n != 2 {
		t.Fatalf("the re-check wrote %d objects, want 2 (a real server added, a weight set)", n)
	}
	if w.tableReads != 1 || w.perVirtualServer != 0 {
		t.Fatalf("the full read read the table %d times and %d virtual servers one at a time; want once and none", w.tableReads, w.perVirtualServer)
	}
	wantRepaired(t, w, keys)
	all, err := w.Fake.VirtualServers()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Status().LastFullRead, (snapshot.FullRead{FromTable: len(all)}); got == nil || *got != want {
		t.Fatalf("inspect's last full read %+v, want %+v", got, want)
	}
}

// What the table's read does not give, left out or after a failure, is
// read one virtual server at a time: a change there is found all the same.
func TestFullReadReadsWhatTheTableMissedOneAtATime(t *testing.T) {
	p, w, keys := tableFixture(t)
	w.leaveOut, w.failAfter = keys[0], 5
	writes := w.Fake.Writes()
	res := mustSync(t, p)
	if n := w.Fake.Writes() - writes; n != 2 {
		t.Fatalf("the re-check wrote %d objects, want 2 (a real server added, a weight set)", n)
	}
	if w.tableReads != 1 {
		t.Fatalf("the table was read %d times, want once", w.tableReads)
	}
	// 5 from the table, the rest one at a time (each list non-empty: one
	// ListedRealServers each, no RealServers).
	all, err := w.Fake.VirtualServers()
	if err != nil {
		t.Fatal(err)
	}
	if want := len(all) - 5; w.perVirtualServer != want {
		t.Fatalf("%d virtual servers read one at a time, want %d (all %d but the table's 5)", w.perVirtualServer, want, len(all))
	}
	// What the metric and inspect say: the table's 5, the rest dumped, and why.
	if r := res.RealServerReads; r.FromTable != 5 || r.Dumped != len(all)-5 || !strings.Contains(r.TableError, "input/output error") {
		t.Fatalf("the sync says %+v, want 5 from the table, %d dumped and the table's error", r, len(all)-5)
	}
	wantRepaired(t, w, keys)
}

// A change that arrives while the full re-check reads the kernel (seconds
// at 10,000 Services) is built and written by that same sync, not left
// for the next one.
func TestChangeDuringTheFullReadIsWrittenByThatSync(t *testing.T) {
	p, w, keys := tableFixture(t)
	web3 := p.Tracker().Service(types.NamespacedName{Namespace: "default", Name: "web-3"})
	if web3 == nil {
		t.Fatal("no web-3 in the tracker")
	}
	w.duringRead = func() {
		slice := servicetest.Slice(web3.ToService(), "web-3-a", 8080, "10.244.1.5@node1", "10.244.1.6@node1", "10.244.1.7@node1", "10.244.1.8@node1")
		slice.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: time.Now().UTC().Format(time.RFC3339Nano)}
		p.Tracker().SetEndpointSlice(slice)
	}
	res := mustSync(t, p)
	if !res.Full || res.EndpointChanges != 1 || len(res.TriggerTimes[v1.IPv4Protocol]) != 1 {
		t.Fatalf("full=%v with %d endpoint changes and trigger times %v, want the full re-check with the one that came during its read", res.Full, res.EndpointChanges, res.TriggerTimes)
	}
	rss, err := w.Fake.RealServers(keys[3])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rss, func(rs ipvs.RealServer) bool { return rs.Address == netip.MustParseAddr("10.244.1.8") }) {
		t.Fatalf("web-3 holds %v after the re-check, want the endpoint added during its read", rss)
	}
	if services, endpoints, _ := p.Tracker().Pending(); services+endpoints != 0 {
		t.Fatalf("%d Service and %d endpoint changes still pending", services, endpoints)
	}
}

// An empty relist during the full read (default/kubernetes gone with every
// Service) holds deletions in that same sync, as it would at the start of
// the next: nothing is deleted.
func TestEmptyListDuringTheFullReadHoldsDeletions(t *testing.T) {
	p, w, keys := tableFixture(t)
	w.duringRead = func() {
		for _, name := range p.Tracker().ServiceNames() {
			p.Tracker().DeleteService(name.Namespace, name.Name)
		}
	}
	res := mustSync(t, p)
	if !res.DeletionsHeld || res.HeldDeletions == 0 {
		t.Fatalf("DeletionsHeld=%v HeldDeletions=%d, want the hold", res.DeletionsHeld, res.HeldDeletions)
	}
	for _, key := range keys {
		if _, err := w.Fake.RealServers(key); err != nil {
			t.Fatalf("%s: %v (deleted during the hold)", key, err)
		}
	}
}
