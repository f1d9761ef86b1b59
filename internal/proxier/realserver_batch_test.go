package proxier

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"
)

// batchingIPVS is the fake as the kernel's adapter looks to the reconciler:
// an ipvs.RealServerWriter. It keeps each batch, fails the writes fail
// names, and counts real-server writes made one call each.
type batchingIPVS struct {
	*ipvs.Fake
	batches [][]ipvs.RealServerWrite
	fail    func(ipvs.RealServerWrite) error
	singles int
}

func (b *batchingIPVS) WriteRealServers(ws []ipvs.RealServerWrite) []error {
	b.batches = append(b.batches, slices.Clone(ws))
	out := make([]error, len(ws))
	for i, w := range ws {
		if b.fail != nil {
			if out[i] = b.fail(w); out[i] != nil {
				continue
			}
		}
		out[i] = ipvs.WriteRealServers(b.Fake, ws[i:i+1])[0]
	}
	return out
}

func (b *batchingIPVS) AddRealServer(k ipvs.VirtualServerKey, rs ipvs.RealServer) error {
	b.singles++
	return b.Fake.AddRealServer(k, rs)
}

func (b *batchingIPVS) UpdateRealServer(k ipvs.VirtualServerKey, rs ipvs.RealServer) error {
	b.singles++
	return b.Fake.UpdateRealServer(k, rs)
}

// A virtual server's new real servers and weight changes reach the kernel
// together, one batch per virtual server, not a call each; a write that
// fails in the middle fails the virtual server (retried) without losing the
// writes around it, and the retry writes only what is missing.
func TestRealServersOfAVirtualServerAreWrittenTogether(t *testing.T) {
	fk := newFakeKernel()
	b := &batchingIPVS{Fake: fk.ipvs}
	k := fk.kernel()
	k.IPVS = b
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	p := proxierAt(t, k, &now)
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1", "10.244.1.6@node1", "10.244.1.7@node1"))
	mustSync(t, p)
	web := webVSFor("10.96.0.10")
	if len(b.batches) != 1 || len(b.batches[0]) != 3 || b.singles != 0 {
		t.Fatalf("batches %v, single calls %d; want one batch of three adds", b.batches, b.singles)
	}

	// Three more endpoints; the second of them fails.
	failing := netip.MustParseAddr("10.244.1.9")
	b.fail = func(w ipvs.RealServerWrite) error {
		if w.RealServer.Address == failing {
			return errors.New("netlink: no buffer space")
		}
		return nil
	}
	b.batches = nil
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1", "10.244.1.6@node1", "10.244.1.7@node1", "10.244.1.8@node1", "10.244.1.9@node1", "10.244.1.10@node1"))
	res := p.Sync()
	if len(b.batches) != 1 || len(b.batches[0]) != 3 {
		t.Fatalf("batches %v, want one of three adds", b.batches)
	}
	if res.FailingObjects[string(snapshot.ObjectVirtualServer)] != 1 {
		t.Fatalf("failing %v, want the virtual server", res.FailingObjects)
	}
	have, err := fk.ipvs.RealServers(web)
	if err != nil {
		t.Fatal(err)
	}
	if len(have) != 5 {
		t.Fatalf("kernel holds %v, want the five real servers that did not fail", have)
	}

	// The retry writes the one that failed, alone.
	b.fail, b.batches = nil, nil
	now = now.Add(retryMin)
	res = p.Sync()
	if len(res.FailingObjects) != 0 || len(b.batches) != 1 || len(b.batches[0]) != 1 || b.batches[0][0].RealServer.Address != failing {
		t.Fatalf("failing %v, batches %v; want the failed real server written alone and nothing failing", res.FailingObjects, b.batches)
	}
	if b.singles != 0 {
		t.Fatalf("%d real servers written one call each", b.singles)
	}
}
