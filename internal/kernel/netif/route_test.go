package netif

import (
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The route half of the adapter table. It runs against Fake, and against
// the kernel on a dummy link where the driver exists (the VM) or else on an
// ifb link, which takes the same routes: this host has no dummy driver.

var (
	range4  = netip.MustParsePrefix("198.51.100.0/24")
	range4b = netip.MustParsePrefix("203.0.113.128/25")
	range6  = netip.MustParsePrefix("2001:db8:96::/112")
)

type routeEnv struct {
	// addForeignRoute adds a local route to p on the link that this
	// package did not add (another protocol).
	addForeignRoute func(t *testing.T, p netip.Prefix)
	// recreateLink brings the deleted link back, up and empty.
	recreateLink func(t *testing.T)
}

var routeCases = []struct {
	name string
	run  func(t *testing.T, a Interface, e routeEnv)
}{
	{"routes need the link", func(t *testing.T, a Interface, _ routeEnv) {
		ok(t, a.DeleteDummy())
		_, err := a.ServiceRoutes()
		wantErr(t, err, ErrNotFound)
		wantErr(t, a.AddServiceRoute(range4), ErrNotFound)
		wantErr(t, a.DeleteServiceRoute(range4), ErrNotFound)
	}},
	{"add, list and delete routes of both families", func(t *testing.T, a Interface, _ routeEnv) {
		wantRoutes(t, a)
		ok(t, a.AddServiceRoute(range6))
		ok(t, a.AddServiceRoute(range4b))
		ok(t, a.AddServiceRoute(range4))
		wantRoutes(t, a, range4, range4b, range6)
		ok(t, a.DeleteServiceRoute(range4b))
		ok(t, a.DeleteServiceRoute(range6))
		wantRoutes(t, a, range4)
	}},
	{"adding a route twice fails with ErrExists, deleting a missing one with ErrNotFound", func(t *testing.T, a Interface, _ routeEnv) {
		ok(t, a.AddServiceRoute(range4))
		wantErr(t, a.AddServiceRoute(range4), ErrExists)
		// Host bits are masked off, as the kernel stores the destination.
		wantErr(t, a.AddServiceRoute(netip.MustParsePrefix("198.51.100.7/24")), ErrExists)
		wantErr(t, a.DeleteServiceRoute(range6), ErrNotFound)
		wantRoutes(t, a, range4)
	}},
	{"routes someone else added are neither listed, replaced nor deleted", func(t *testing.T, a Interface, e routeEnv) {
		e.addForeignRoute(t, range4b)
		wantRoutes(t, a)
		wantErr(t, a.AddServiceRoute(range4b), ErrExists)
		wantErr(t, a.DeleteServiceRoute(range4b), ErrNotFound)
		wantRoutes(t, a)
	}},
	{"unbinding an address keeps the routes while an IPv4 address is left", func(t *testing.T, a Interface, _ routeEnv) {
		inside, other := netip.MustParseAddr("198.51.100.10"), netip.MustParseAddr("192.0.2.1")
		ok(t, a.AddDummyAddress(other))
		ok(t, a.AddServiceRoute(range4))
		ok(t, a.AddServiceRoute(range6))
		ok(t, a.AddDummyAddress(inside))
		ok(t, a.AddDummyAddress(svc6))
		ok(t, a.DeleteDummyAddress(inside))
		ok(t, a.DeleteDummyAddress(svc6))
		wantRoutes(t, a, range4, range6)
		wantDummy(t, a, other)
	}},
	{"unbinding the last IPv4 address flushes the IPv4 routes", func(t *testing.T, a Interface, e routeEnv) {
		ok(t, a.AddDummyAddress(svc4a))
		ok(t, a.AddServiceRoute(range4))
		ok(t, a.AddServiceRoute(range6))
		e.addForeignRoute(t, range4b)
		ok(t, a.DeleteDummyAddress(svc4a))
		wantRoutes(t, a, range6)
		// The foreign one went too: adding ours to its prefix now works.
		ok(t, a.AddServiceRoute(range4b))
	}},
	{"deleting the link removes the routes", func(t *testing.T, a Interface, e routeEnv) {
		ok(t, a.AddServiceRoute(range4))
		ok(t, a.AddServiceRoute(range6))
		ok(t, a.DeleteDummy())
		_, err := a.ServiceRoutes()
		wantErr(t, err, ErrNotFound)
		e.recreateLink(t)
		wantRoutes(t, a)
	}},
	{"an invalid prefix is refused", func(t *testing.T, a Interface, _ routeEnv) {
		if err := a.AddServiceRoute(netip.Prefix{}); err == nil {
			t.Fatal("AddServiceRoute(invalid) succeeded")
		}
		wantRoutes(t, a)
	}},
}

func TestServiceRoutes(t *testing.T) {
	t.Run("fake", func(t *testing.T) {
		for _, c := range routeCases {
			t.Run(c.name, func(t *testing.T) {
				f := NewFake(testDummy)
				ok(t, f.EnsureDummy())
				c.run(t, f, routeEnv{
					addForeignRoute: func(_ *testing.T, p netip.Prefix) { f.SetForeignRoute(p) },
					recreateLink:    func(t *testing.T) { ok(t, f.EnsureDummy()) },
				})
			})
		}
	})
	t.Run("kernel", func(t *testing.T) {
		if os.Geteuid() != 0 {
			kerneltest.Skip(t, kerneltest.NotRoot, "real-kernel route tests need root to create a network namespace")
		}
		linkType := linkTypeHere(t)
		t.Logf("link type %s", linkType)
		for _, c := range routeCases {
			t.Run(c.name, func(t *testing.T) {
				a, h, _ := routeKernel(t, linkType)
				ok(t, a.EnsureDummy())
				c.run(t, a, routeEnv{addForeignRoute: func(t *testing.T, p netip.Prefix) {
					link, err := h.LinkByName(testDummy)
					ok(t, err)
					r := serviceRoute(link, p)
					r.Protocol = unix.RTPROT_STATIC
					ok(t, h.RouteAdd(r))
				}, recreateLink: func(t *testing.T) {
					if linkType == "ifb" {
						addIfb(t, h)
					}
					ok(t, a.EnsureDummy())
				}})
			})
		}
	})
}

// TestServiceRoutesDumpIsFilteredByTheKernel: with many cluster IPs bound
// (kube-proxy's layout, or ipvsproxy without a Service CIDR) table local
// holds a route per address; listing our few routes must not receive and
// parse them all. Measured in allocations, which grow with every route the
// kernel sends.
func TestServiceRoutesDumpIsFilteredByTheKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.NotRoot, "needs root to create a network namespace")
	}
	linkType := linkTypeHere(t)
	a, _, _ := routeKernel(t, linkType)
	ok(t, a.EnsureDummy())
	ok(t, a.AddServiceRoute(range4))
	ok(t, a.AddServiceRoute(range6))
	list := func() { wantRoutes(t, a, range4, range6) }
	before := testing.AllocsPerRun(5, list)
	const bound = 1000
	for i := range bound {
		addr := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 5, 14: byte(i >> 8), 15: byte(i)})
		if i < 250 {
			addr = netip.AddrFrom4([4]byte{192, 0, 2, byte(1 + i)})
		}
		ok(t, a.AddDummyAddress(addr))
	}
	after := testing.AllocsPerRun(5, list)
	t.Logf("allocations per ServiceRoutes: %.0f with no address bound, %.0f with %d", before, after, bound)
	if after > before+bound/10 {
		t.Fatalf("ServiceRoutes allocates %.0f times with %d addresses bound (%.0f with none): the kernel sent every local route", after, bound, before)
	}
}

// TestServiceRouteMakesEveryAddressLocal asks the kernel's FIB where an
// address inside a routed range goes: to this host (RTN_LOCAL) on the link,
// without any address bound. Kernel only: it is the point of the route.
func TestServiceRouteMakesEveryAddressLocal(t *testing.T) {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.NotRoot, "needs root to create a network namespace")
	}
	linkType := linkTypeHere(t)
	a, h, ns := routeKernel(t, linkType)
	ok(t, a.EnsureDummy())
	netnstest.LoopbackUp(t, ns)
	inside, outside := netip.MustParseAddr("198.51.100.77"), netip.MustParseAddr("203.0.113.5")
	local := func(addr netip.Addr) bool {
		routes, err := h.RouteGet(net.IP(addr.AsSlice()))
		if err != nil {
			return false // ENETUNREACH: no route at all, certainly not local
		}
		return len(routes) > 0 && routes[0].Type == unix.RTN_LOCAL
	}
	if local(inside) {
		t.Fatalf("%s is local before any route", inside)
	}
	ok(t, a.AddServiceRoute(range4))
	ok(t, a.AddServiceRoute(range6))
	for _, addr := range []netip.Addr{inside, netip.MustParseAddr("2001:db8:96::7")} {
		if !local(addr) {
			t.Errorf("%s is not local with a route to its range on %s", addr, linkType)
		}
	}
	if local(outside) {
		t.Errorf("%s outside every range is local", outside)
	}
	ok(t, a.DeleteServiceRoute(range4))
	if local(inside) {
		t.Errorf("%s is still local after its route was deleted", inside)
	}
}

// routeKernel opens the real implementation in a fresh namespace on a link
// of linkType ("ifb" is created here; "dummy" by EnsureDummy), plus a
// handle for what the test does behind its back.
// linkTypeHere is "dummy" where the driver exists (the VM), else "ifb"
// (this host), which takes the same addresses and routes.
func linkTypeHere(t testing.TB) string {
	if reason, _ := dummyModule.Unavailable(t); reason != "" {
		return "ifb"
	}
	return "dummy"
}

func routeKernel(t testing.TB, linkType string) (Interface, *netlink.Handle, netns.NsHandle) {
	t.Helper()
	ns := netnstest.New(t)
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	if linkType == "ifb" {
		addIfb(t, h)
	}
	a, err := NewInNamespace(testDummy, ns)
	if err != nil {
		t.Fatal(err)
	}
	k := a.(*kernel)
	k.linkType = linkType
	t.Cleanup(func() { k.Close() })
	return k, h, ns
}

func wantRoutes(t *testing.T, a Interface, want ...netip.Prefix) {
	t.Helper()
	got, err := a.ServiceRoutes()
	ok(t, err)
	if got == nil || !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("ServiceRoutes() = %v, want %v", got, want)
	}
}

func addIfb(t testing.TB, h *netlink.Handle) {
	t.Helper()
	attrs := netlink.NewLinkAttrs()
	attrs.Name = testDummy
	if err := h.LinkAdd(&netlink.Ifb{LinkAttrs: attrs}); err != nil {
		kerneltest.Skip(t, kerneltest.NoKernelFeature, "no dummy and no ifb link on this kernel: %v", err)
	}
	// As createDummy does for the dummy: no fe80:: address of its own.
	link, err := h.LinkByName(testDummy)
	ok(t, err)
	ok(t, h.LinkSetIP6AddrGenMode(link, nl.IN6_ADDR_GEN_MODE_NONE))
}
