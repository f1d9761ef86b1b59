package proxier

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"
	"github.com/ipvsproxy/ipvsproxy/ipset"
)

// batchingIPSet is the fake as the kernel's adapter looks to the
// reconciler: an ipset.EntryAdder and ipset.EntryDeleter. It keeps each
// batch by set, fails the entries fail names, and counts entries written
// one call each by set.
type batchingIPSet struct {
	*ipset.Fake
	batches, deleteBatches map[string][][]ipset.Entry
	fail                   func(set string, e ipset.Entry) error
	singles, singleDeletes map[string]int
}

func newBatchingIPSet(f *ipset.Fake) *batchingIPSet {
	return &batchingIPSet{Fake: f, batches: map[string][][]ipset.Entry{}, deleteBatches: map[string][][]ipset.Entry{},
		singles: map[string]int{}, singleDeletes: map[string]int{}}
}

func (b *batchingIPSet) DeleteEntries(name string, es []ipset.Entry) []error {
	return b.batch(b.deleteBatches, name, es, ipset.DeleteEntries)
}

func (b *batchingIPSet) DeleteEntry(name string, e ipset.Entry) error {
	b.singleDeletes[name]++
	return b.Fake.DeleteEntry(name, e)
}

func (b *batchingIPSet) AddEntries(name string, es []ipset.Entry) []error {
	return b.batch(b.batches, name, es, ipset.AddEntries)
}

// batch keeps es as one batch of set name in kept, fails the entries
// b.fail names and writes each of the others with write on the fake alone
// (not counted as a single call).
func (b *batchingIPSet) batch(kept map[string][][]ipset.Entry, name string, es []ipset.Entry, write func(ipset.Interface, string, []ipset.Entry) []error) []error {
	kept[name] = append(kept[name], slices.Clone(es))
	out := make([]error, len(es))
	for i, e := range es {
		if b.fail != nil {
			if out[i] = b.fail(name, e); out[i] != nil {
				continue
			}
		}
		out[i] = write(b.Fake, name, es[i:i+1])[0]
	}
	return out
}

// newBatchingProxier is a proxier on the fakes, its ipset adapter a
// batchingIPSet, its clock *now, the API server's Service in its tracker.
func newBatchingProxier(t *testing.T, now *time.Time) (*Proxier, *batchingIPSet, *fakeKernel) {
	t.Helper()
	fk := newFakeKernel()
	b := newBatchingIPSet(fk.ipset)
	k := fk.kernel()
	k.IPSet = b
	return proxierAt(t, k, now), b, fk
}

func (b *batchingIPSet) AddEntry(name string, e ipset.Entry) error {
	b.singles[name]++
	return b.Fake.AddEntry(name, e)
}

// The members a sync adds reach the kernel together, one batch per set,
// not a call each (on a full sync the ownership records too, a group of
// virtual servers' just before they are created; on a partial sync a
// record stays a call of its own); a member that fails fails alone, and
// the retry adds only it.
func TestSetMembersAreAddedTogether(t *testing.T) {
	now := time.Date(2026, 12, 5, 16, 0, 0, 0, time.UTC)
	p, b, fk := newBatchingProxier(t, &now)
	for _, name := range []string{"web", "api", "db"} {
		svc := servicetest.Service(name, map[string]string{"web": "10.96.0.10", "api": "10.96.0.11", "db": "10.96.0.12"}[name])
		p.Tracker().SetService(svc)
		p.Tracker().SetEndpointSlice(servicetest.Slice(svc, name+"-a", 8080, "10.244.1.5@node1"))
	}
	mustSync(t, p)
	clusterIPs := b.batches[owned.SetClusterIP]
	if len(clusterIPs) != 1 || len(clusterIPs[0]) != 3 {
		t.Fatalf("cluster IP set batches %v, want one of three members", clusterIPs)
	}
	if records := b.batches[owned.SetOwned]; len(records) != 1 || len(records[0]) != 3 {
		t.Fatalf("ownership record batches %v, want one of three", records)
	}
	for set, n := range b.singles {
		t.Fatalf("%d members of %s added one call each", n, set)
	}

	// A new Service whose cluster IP member fails: only it fails, the
	// others' members are there, and the retry adds it alone.
	failing := ipset.Entry{IP: netip.MustParseAddr("10.96.0.13"), Protocol: "tcp", Port: 80}
	b.fail = func(set string, e ipset.Entry) error {
		if set == owned.SetClusterIP && e == failing {
			return errors.New("netlink: no buffer space")
		}
		return nil
	}
	for set := range b.batches {
		delete(b.batches, set)
	}
	svc := servicetest.Service("cache", "10.96.0.13")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "cache-a", 8080, "10.244.1.6@node1"))
	res := p.Sync()
	if res.FailingObjects[string(snapshot.ObjectSetEntry)] != 1 {
		t.Fatalf("failing %v, want the one member", res.FailingObjects)
	}
	have, err := fk.ipset.Entries(owned.SetClusterIP)
	if err != nil || len(have) != 3 {
		t.Fatalf("cluster IP set holds %v (%v), want the three members that did not fail", have, err)
	}
	b.fail = nil
	for set := range b.batches {
		delete(b.batches, set)
	}
	now = now.Add(retryMin)
	res = p.Sync()
	if len(res.FailingObjects) != 0 {
		t.Fatalf("failing %v after the retry", res.FailingObjects)
	}
	if got := b.batches[owned.SetClusterIP]; len(got) != 1 || len(got[0]) != 1 || got[0][0] != failing {
		t.Fatalf("retry batches %v, want the failed member alone", b.batches)
	}
}

// raceIPVS creates someone else's virtual server at theirs just before
// the proxier's create of the same key, as another agent could between
// the proxier's full read and its write.
type raceIPVS struct {
	*ipvs.Fake
	theirs ipvs.VirtualServerKey
}

func (r *raceIPVS) AddVirtualServer(vs ipvs.VirtualServer) error {
	if vs.VirtualServerKey == r.theirs {
		if err := r.Fake.AddVirtualServer(ipvs.VirtualServer{VirtualServerKey: r.theirs, Scheduler: "wlc"}); err != nil {
			return err
		}
	}
	return r.Fake.AddVirtualServer(vs)
}

// A record added ahead of a create that then finds someone else's virtual
// server in the way is taken back: theirs is never recorded as ours, and
// the others of the group are recorded and created.
func TestRecordAheadOfACreateThatLosesTheKey(t *testing.T) {
	fk := newFakeKernel()
	b := newBatchingIPSet(fk.ipset)
	race := &raceIPVS{Fake: fk.ipvs, theirs: webVSFor("10.96.0.11")}
	k := fk.kernel()
	k.IPSet, k.IPVS = b, race
	p, err := New(testConfig(), servicetest.ThisNode, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Tracker().SetService(apiServerService())
	for name, ip := range map[string]string{"web": "10.96.0.10", "api": "10.96.0.11", "db": "10.96.0.12"} {
		svc := servicetest.Service(name, ip)
		p.Tracker().SetService(svc)
		p.Tracker().SetEndpointSlice(servicetest.Slice(svc, name+"-a", 8080, "10.244.1.5@node1"))
	}
	p.Sync()
	if records := b.batches[owned.SetOwned]; len(records) != 1 || len(records[0]) != 3 {
		t.Fatalf("ownership record batches %v, want one of three", records)
	}
	recorded, err := fk.ipset.Entries(owned.SetOwned)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range recorded {
		got = append(got, e.String(ipset.HashIPPort))
	}
	slices.Sort(got)
	if want := []string{"10.96.0.10,tcp:80", "10.96.0.12,tcp:80"}; !slices.Equal(got, want) {
		t.Fatalf("recorded %v, want %v (not the key someone else took)", got, want)
	}
	theirs, err := fk.ipvs.RealServers(race.theirs)
	if err != nil || len(theirs) != 0 {
		t.Fatalf("someone else's virtual server holds %v (%v), want it untouched", theirs, err)
	}
	for _, ip := range []string{"10.96.0.10", "10.96.0.12"} {
		if rss, err := fk.ipvs.RealServers(webVSFor(ip)); err != nil || len(rss) != 1 {
			t.Fatalf("%s holds %v (%v), want its real server", ip, rss, err)
		}
	}
}

// The members and ownership records a sync removes reach the kernel
// together, one batch per set, not a call each; a member or record that
// fails fails alone (its virtual server is gone all the same), and the
// retry removes only it.
func TestSetMembersAreDeletedTogether(t *testing.T) {
	now := time.Date(2026, 12, 5, 19, 0, 0, 0, time.UTC)
	p, b, fk := newBatchingProxier(t, &now)
	ips := map[string]string{"web": "10.96.0.10", "api": "10.96.0.11", "db": "10.96.0.12", "x": "10.96.0.20", "y": "10.96.0.21"}
	for _, name := range []string{"web", "api", "db", "x", "y"} {
		svc := servicetest.Service(name, ips[name])
		p.Tracker().SetService(svc)
		p.Tracker().SetEndpointSlice(servicetest.Slice(svc, name+"-a", 8080, "10.244.1.5@node1"))
	}
	mustSync(t, p)
	member := func(name string) ipset.Entry {
		return ipset.Entry{IP: netip.MustParseAddr(ips[name]), Protocol: "tcp", Port: 80}
	}
	holds := func(set string, e ipset.Entry) bool {
		t.Helper()
		have, err := fk.ipset.Entries(set)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(have, e)
	}

	p.Tracker().DeleteService("default", "api")
	p.Tracker().DeleteService("default", "db")
	mustSync(t, p)
	for _, set := range []string{owned.SetClusterIP, owned.SetOwned} {
		if got := b.deleteBatches[set]; len(got) != 1 || len(got[0]) != 2 {
			t.Fatalf("%s deletion batches %v, want one of two members", set, got)
		}
		for _, name := range []string{"api", "db"} {
			if holds(set, member(name)) {
				t.Fatalf("%s still holds %s's member", set, name)
			}
		}
		if !holds(set, member("web")) {
			t.Fatalf("%s lost web's member", set)
		}
	}
	for set, n := range b.singleDeletes {
		t.Fatalf("%d members of %s deleted one call each", n, set)
	}

	// x's cluster IP member and y's record fail: only they fail, the
	// virtual servers are gone, and the retry removes the two alone.
	b.fail = func(set string, e ipset.Entry) error {
		if set == owned.SetClusterIP && e == member("x") || set == owned.SetOwned && e == member("y") {
			return errors.New("netlink: no buffer space")
		}
		return nil
	}
	clear(b.deleteBatches)
	p.Tracker().DeleteService("default", "x")
	p.Tracker().DeleteService("default", "y")
	res := p.Sync()
	if res.FailingObjects[string(snapshot.ObjectSetEntry)] != 1 || res.FailingObjects[string(snapshot.ObjectVirtualServer)] != 1 {
		t.Fatalf("failing %v, want x's member and y's record (its virtual server)", res.FailingObjects)
	}
	if _, err := fk.ipvs.RealServers(ipvs.VirtualServerKey{Address: netip.MustParseAddr(ips["y"]), Port: 80, Protocol: ipvs.TCP}); !errors.Is(err, ipvs.ErrNotFound) {
		t.Fatalf("y's virtual server: %v, want it gone though its record failed", err)
	}
	if holds(owned.SetClusterIP, member("y")) || holds(owned.SetOwned, member("x")) {
		t.Fatal("a member that did not fail was not removed")
	}
	b.fail = nil
	clear(b.deleteBatches)
	now = now.Add(retryMin)
	if res = p.Sync(); len(res.FailingObjects) != 0 {
		t.Fatalf("failing %v after the retry", res.FailingObjects)
	}
	if got := b.deleteBatches[owned.SetClusterIP]; len(got) != 1 || !slices.Equal(got[0], []ipset.Entry{member("x")}) {
		t.Fatalf("retry of the cluster IP set: batches %v, want x's member alone", got)
	}
	if got := b.deleteBatches[owned.SetOwned]; len(got) != 1 || !slices.Equal(got[0], []ipset.Entry{member("y")}) {
		t.Fatalf("retry of the records: batches %v, want y's record alone", got)
	}
	if holds(owned.SetClusterIP, member("x")) || holds(owned.SetOwned, member("y")) {
		t.Fatal("the retry left a member behind")
	}
}
