package proxier

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/record"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
)

// creatingIPVS is the fake as the kernel's adapter looks to the reconciler:
// an ipvs.VirtualServerAdder. It keeps each batch's size and counts the
// creates made one call each; in a batch it can fail one key once (a
// netlink error) and find someone else's virtual server at another, made
// just before (as another agent could between the full read and the
// batch).
type creatingIPVS struct {
	*ipvs.Fake
	batches       []int
	singles       int
	failOnce      ipvs.VirtualServerKey
	theirsInBatch ipvs.VirtualServerKey
}

func (c *creatingIPVS) AddVirtualServers(vss []ipvs.VirtualServer) []error {
	c.batches = append(c.batches, len(vss))
	out := make([]error, len(vss))
	for i, vs := range vss {
		switch vs.VirtualServerKey {
		case c.failOnce:
			c.failOnce = ipvs.VirtualServerKey{}
			out[i] = errors.New("add virtual server: netlink receive: no buffer space available")
			continue
		case c.theirsInBatch:
			if err := c.Fake.AddVirtualServer(ipvs.VirtualServer{VirtualServerKey: vs.VirtualServerKey, Scheduler: "wlc"}); err != nil {
				out[i] = err
				continue
			}
		}
		out[i] = c.Fake.AddVirtualServer(vs)
	}
	return out
}

func (c *creatingIPVS) AddVirtualServer(vs ipvs.VirtualServer) error {
	c.singles++
	return c.Fake.AddVirtualServer(vs)
}

// A cold sync creates its virtual servers 64 per batch, after their
// records; one whose create failed in the batch is created on its own, and
// one someone else created meanwhile is left to them (a PortConflict
// Event, no record), the others created and filled.
func TestVirtualServersAreCreatedTogether(t *testing.T) {
	fk := newFakeKernel()
	c := &creatingIPVS{Fake: fk.ipvs, failOnce: webVSFor("10.96.1.5"), theirsInBatch: webVSFor("10.96.1.9")}
	k := fk.kernel()
	k.IPVS = c
	rec := record.NewFakeRecorder(100)
	p, err := New(testConfig(), servicetest.ThisNode, k, rec)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return now }
	p.Tracker().SetService(apiServerService())
	const n = 100
	for i := range n {
		svc := servicetest.Service(fmt.Sprintf("web-%d", i), fmt.Sprintf("10.96.1.%d", i))
		p.Tracker().SetService(svc)
		p.Tracker().SetEndpointSlice(servicetest.Slice(svc, fmt.Sprintf("web-%d-a", i), 8080, "10.244.1.5@node1", "10.244.1.6@node1"))
	}
	p.Sync()
	if len(c.batches) != 2 || c.batches[0] != 64 || c.batches[1] != n-64 {
		t.Fatalf("virtual servers created in batches of %v, want 64 and %d", c.batches, n-64)
	}
	// The failed one and theirs, again on their own.
	if c.singles != 2 {
		t.Fatalf("%d virtual servers created one call each, want 2 (the failed one, theirs)", c.singles)
	}
	for i := range n {
		key := webVSFor(fmt.Sprintf("10.96.1.%d", i))
		rss, err := fk.ipvs.RealServers(key)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		want := 2
		if key == c.theirsInBatch {
			want = 0
		}
		if len(rss) != want {
			t.Fatalf("%s holds %v, want %d real servers", key, rss, want)
		}
	}
	records, err := fk.ipset.Entries(recordEntry(c.theirsInBatch).Set)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(records, recordEntry(c.theirsInBatch).Entry) || len(records) != n-1 {
		t.Fatalf("%d records, want %d: every virtual server but someone else's", len(records), n-1)
	}
	if ev := drainEvents(rec); !strings.Contains(ev, "PortConflict") || !strings.Contains(ev, "10.96.1.9:80") {
		t.Fatalf("events %q: want a PortConflict for 10.96.1.9:80", ev)
	}
	// A second full sync creates nothing.
	c.batches, c.singles = nil, 0
	p.RequestFullSync()
	if p.Sync(); len(c.batches) != 0 || c.singles != 0 {
		t.Fatalf("a full sync after the cold one created virtual servers (batches %v, singles %d), want none", c.batches, c.singles)
	}
}
