package netif

import (
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
)

const testDummy = "ipvsp-test0"

// skipUnlessKernel skips (under CI: fails, unless accepted) when the
// real-kernel half cannot run here: not root, or no dummy driver even after
// modprobe dummy.
func skipUnlessKernel(t *testing.T) {
	t.Helper()
	kerneltest.RequireModule(t, dummyModule)
}

// dummyModule is the dummy driver, probed in a throwaway namespace.
var dummyModule = kerneltest.Module{Name: "dummy", Reason: kerneltest.NoDummy, Unsupported: ErrUnsupported,
	Probe: func(t testing.TB) error { return newKernelInFreshNamespace(t).EnsureDummy() }}

// newKernelInFreshNamespace opens the real implementation in a new, empty
// network namespace that disappears when the test ends.
func newKernelInFreshNamespace(t testing.TB) Interface {
	t.Helper()
	a, _ := kernelInFreshNamespace(t)
	return a
}

func kernelInFreshNamespace(t testing.TB) (Interface, netns.NsHandle) {
	t.Helper()
	return netnstest.Open(t, "netif", func(ns netns.NsHandle) (Interface, error) { return NewInNamespace(testDummy, ns) })
}

// An address bound to the dummy with another prefix length (kube-proxy
// leftovers, an admin) is listed and can be unbound. Kernel only: Fake binds
// nothing but single-address prefixes.
func TestKernelUnbindsAddressOfAnyPrefixLength(t *testing.T) {
	skipUnlessKernel(t)
	a, ns := kernelInFreshNamespace(t)
	ok(t, a.EnsureDummy())
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	link, err := h.LinkByName(testDummy)
	if err != nil {
		t.Fatal(err)
	}
	wide, err := netlink.ParseAddr("192.0.2.10/24")
	if err != nil {
		t.Fatal(err)
	}
	ok(t, h.AddrAdd(link, wide))
	wantDummy(t, a, svc4a)
	ok(t, a.DeleteDummyAddress(svc4a))
	wantDummy(t, a)
	wantErr(t, a.DeleteDummyAddress(svc4a), ErrNotFound)
}
