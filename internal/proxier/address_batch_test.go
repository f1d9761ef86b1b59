package proxier

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"
)

// batchingNetif is the fake as the kernel's adapter looks to the
// reconciler: a netif.AddressBatcher. It keeps each batch, fails the
// addresses fail names, and counts addresses written one call each.
type batchingNetif struct {
	*netif.Fake
	binds, unbinds [][]netip.Addr
	fail           func(netip.Addr) error
	singles        int
}

func (b *batchingNetif) AddDummyAddresses(addrs []netip.Addr) []error {
	b.binds = append(b.binds, slices.Clone(addrs))
	return b.batch(addrs, b.Fake.AddDummyAddress)
}

func (b *batchingNetif) DeleteDummyAddresses(addrs []netip.Addr) []error {
	b.unbinds = append(b.unbinds, slices.Clone(addrs))
	return b.batch(addrs, b.Fake.DeleteDummyAddress)
}

func (b *batchingNetif) batch(addrs []netip.Addr, write func(netip.Addr) error) []error {
	out := make([]error, len(addrs))
	for i, a := range addrs {
		if b.fail != nil {
			if out[i] = b.fail(a); out[i] != nil {
				continue
			}
		}
		out[i] = write(a)
	}
	return out
}

func (b *batchingNetif) AddDummyAddress(a netip.Addr) error {
	b.singles++
	return b.Fake.AddDummyAddress(a)
}

func (b *batchingNetif) DeleteDummyAddress(a netip.Addr) error {
	b.singles++
	return b.Fake.DeleteDummyAddress(a)
}

// With cluster IPs bound one by one (no Service CIDR), the addresses a
// sync binds and unbinds reach the kernel together, not a call each; one
// that fails fails alone, and the retry binds only it.
func TestAddressesAreBoundTogether(t *testing.T) {
	fk := newFakeKernel()
	b := &batchingNetif{Fake: fk.netif}
	k := fk.kernel()
	k.Netif = b
	now := time.Date(2026, 12, 5, 19, 30, 0, 0, time.UTC)
	p := proxierAt(t, k, &now)
	ips := map[string]netip.Addr{}
	add := func(names ...string) {
		for _, name := range names {
			ips[name] = netip.AddrFrom4([4]byte{10, 96, 0, byte(10 + len(ips))})
			svc := servicetest.Service(name, ips[name].String())
			p.Tracker().SetService(svc)
			p.Tracker().SetEndpointSlice(servicetest.Slice(svc, name+"-a", 8080, "10.244.1.5@node1"))
		}
	}
	add("web", "api", "db")
	mustSync(t, p)
	if len(b.binds) != 1 || len(b.binds[0]) != 3 {
		t.Fatalf("bind batches %v, want one of the three cluster IPs", b.binds)
	}
	p.Tracker().DeleteService("default", "api")
	p.Tracker().DeleteService("default", "db")
	mustSync(t, p)
	if len(b.unbinds) != 1 || len(b.unbinds[0]) != 2 {
		t.Fatalf("unbind batches %v, want one of two", b.unbinds)
	}
	if b.singles != 0 {
		t.Fatalf("%d addresses written a call each", b.singles)
	}
	if got, _ := fk.netif.DummyAddresses(); !slices.Equal(got, []netip.Addr{ips["web"]}) {
		t.Fatalf("bound %v, want web's cluster IP alone", got)
	}

	// One of two new cluster IPs fails: only it, and the retry binds it alone.
	b.binds = nil
	b.fail = func(a netip.Addr) error {
		if a == ips["x"] {
			return errors.New("netlink: no buffer space")
		}
		return nil
	}
	add("x", "y")
	res := p.Sync()
	if res.FailingObjects[string(snapshot.ObjectAddress)] != 1 {
		t.Fatalf("failing %v, want x's address", res.FailingObjects)
	}
	b.fail, b.binds = nil, nil
	now = now.Add(retryMin)
	if res = p.Sync(); len(res.FailingObjects) != 0 {
		t.Fatalf("failing %v after the retry", res.FailingObjects)
	}
	if len(b.binds) != 1 || !slices.Equal(b.binds[0], []netip.Addr{ips["x"]}) {
		t.Fatalf("retry batches %v, want x's address alone", b.binds)
	}
	got, _ := fk.netif.DummyAddresses()
	want := []netip.Addr{ips["web"], ips["x"], ips["y"]}
	slices.SortFunc(want, netip.Addr.Compare)
	if !slices.Equal(got, want) {
		t.Fatalf("bound %v, want %v", got, want)
	}
}
