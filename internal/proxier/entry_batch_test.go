package proxier

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"
	"github.com/ipvsproxy/ipvsproxy/ipset"
)

// batchingIPSet is the fake as the kernel's adapter looks to the
// reconciler: an ipset.EntryAdder. It keeps each batch by set, fails the
// entries fail names, and counts entries added one call each by set.
type batchingIPSet struct {
	*ipset.Fake
	batches map[string][][]ipset.Entry
	fail    func(set string, e ipset.Entry) error
	singles map[string]int
}

func (b *batchingIPSet) AddEntries(name string, es []ipset.Entry) []error {
	b.batches[name] = append(b.batches[name], slices.Clone(es))
	out := make([]error, len(es))
	for i, e := range es {
		if b.fail != nil {
			if out[i] = b.fail(name, e); out[i] != nil {
				continue
			}
		}
		out[i] = ipset.AddEntries(b.Fake, name, es[i:i+1])[0]
	}
	return out
}

func (b *batchingIPSet) AddEntry(name string, e ipset.Entry) error {
	b.singles[name]++
	return b.Fake.AddEntry(name, e)
}

// The members a sync adds reach the kernel together, one batch per set,
// not a call each (the ownership record of a virtual server stays a call of
// its own, made just before the virtual server); a member that fails fails
// alone, and the retry adds only it.
func TestSetMembersAreAddedTogether(t *testing.T) {
	fk := newFakeKernel()
	b := &batchingIPSet{Fake: fk.ipset, batches: map[string][][]ipset.Entry{}, singles: map[string]int{}}
	k := fk.kernel()
	k.IPSet = b
	p, err := New(testConfig(), servicetest.ThisNode, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 5, 16, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return now }
	p.Tracker().SetService(apiServerService())
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
	for set, n := range b.singles {
		if set != owned.SetOwned {
			t.Fatalf("%d members of %s added one call each", n, set)
		}
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
