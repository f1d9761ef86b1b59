package netif

import (
	"net/netip"
	"os"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
)

// batchKernel is the kernel adapter on a dummy link where the driver
// exists (the VM), else on an ifb link (this host), which takes the same
// addresses.
func batchKernel(t testing.TB) (*kernel, *netlink.Handle) {
	t.Helper()
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.NotRoot, "needs root to create a network namespace")
	}
	a, h, _ := routeKernel(t, linkTypeHere(t))
	ok(t, a.EnsureDummy())
	return a.(*kernel), h
}

// TestKernelBindsAddressesInBatches binds and unbinds addresses of both
// families in batches, reads them back through the netlink library (its
// own encoding, not this package's), and unbinds one bound with another
// prefix length (the single path's dump): every send must be taken whole.
func TestKernelBindsAddressesInBatches(t *testing.T) {
	k, h := batchKernel(t)
	var addrs []netip.Addr
	for i := range 200 {
		addrs = append(addrs, netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}), netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 9, 14: byte(i >> 8), 15: byte(i)}))
	}
	for i, err := range k.AddDummyAddresses(addrs) {
		if err != nil {
			t.Fatalf("bind %s: %v", addrs[i], err)
		}
	}
	link, err := h.LinkByName(testDummy)
	ok(t, err)
	listed, err := h.AddrList(link, netlink.FAMILY_ALL)
	ok(t, err)
	bound := map[netip.Addr]bool{}
	for _, a := range listed {
		ip, _ := netip.AddrFromSlice(a.IP)
		ones, bits := a.Mask.Size()
		if ones != bits {
			t.Fatalf("%s bound as /%d, want a host prefix", a.IPNet, ones)
		}
		if ip.Is6() && !ip.Is4In6() && a.Flags&0x02 == 0 { // IFA_F_NODAD
			t.Fatalf("%s bound without IFA_F_NODAD (flags %#x)", a.IPNet, a.Flags)
		}
		bound[ip.Unmap()] = true
	}
	for _, a := range addrs {
		if !bound[a] {
			t.Fatalf("%s not bound; the library lists %d addresses", a, len(listed))
		}
	}
	wide, err := netlink.ParseAddr("203.0.113.7/24")
	ok(t, err)
	ok(t, h.AddrAdd(link, wide))
	gone := append(addrs[:300:300], netip.MustParseAddr("203.0.113.7"))
	for i, err := range k.DeleteDummyAddresses(gone) {
		if err != nil {
			t.Fatalf("unbind %s: %v", gone[i], err)
		}
	}
	left := slices.Clone(addrs[300:])
	slices.SortFunc(left, netip.Addr.Compare)
	wantDummy(t, k, left...)
	if n := k.batches.failedSends.Load(); n != 0 {
		t.Fatalf("%d sends failed as a whole (their addresses went one at a time)", n)
	}
}

// BenchmarkKernelAddressBinds: what binding and unbinding one address
// costs a call each (AddDummyAddress: a link lookup and a message) and in
// batches, 1,000 IPv4 addresses.
func BenchmarkKernelAddressBinds(b *testing.B) {
	k, _ := batchKernel(b)
	const n = 1000
	addrs := make([]netip.Addr, n)
	for i := range addrs {
		addrs[i] = netip.AddrFrom4([4]byte{198, 51, byte(100 + i/250), byte(i % 250)})
	}
	run := func(b *testing.B, bind, unbind func()) {
		for range b.N {
			bind()
			unbind()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n*2), "ns/write")
	}
	must := func(errs []error) {
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("one-call-each", func(b *testing.B) {
		run(b, func() { must(eachAddress(addrs, k.AddDummyAddress)) }, func() { must(eachAddress(addrs, k.DeleteDummyAddress)) })
	})
	b.Run("batched", func(b *testing.B) {
		run(b, func() { must(k.AddDummyAddresses(addrs)) }, func() { must(k.DeleteDummyAddresses(addrs)) })
	})
}
