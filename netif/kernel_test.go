package netif

import (
	"errors"
	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

const testDummy = "ipvsp-test0"

// kernelSkipReason says why the real-kernel half of the adapter table cannot
// run here, or "" when it can. It probes for the dummy driver in a throwaway
// namespace and tries `modprobe dummy` once. Any failure other than
// ErrUnsupported fails the test: that would be a bug, not a missing feature.
func kernelSkipReason(t testing.TB) (kerneltest.Reason, string) {
	if os.Geteuid() != 0 {
		return kerneltest.NotRoot, "real-kernel netif tests need root to create a network namespace"
	}
	probe := func() error {
		a := newKernelInFreshNamespace(t)
		return a.EnsureDummy()
	}
	err := probe()
	if errors.Is(err, ErrUnsupported) {
		out, merr := exec.Command("modprobe", "dummy").CombinedOutput()
		if merr != nil {
			return kerneltest.NoDummy, "kernel has no dummy driver (modprobe dummy: " + strings.TrimSpace(string(out)) + ": " + merr.Error() + "): " + err.Error()
		}
		err = probe()
	}
	if errors.Is(err, ErrUnsupported) {
		return kerneltest.NoDummy, "kernel has no dummy driver even after modprobe dummy: " + err.Error()
	}
	if err != nil {
		t.Fatalf("probing for the dummy driver: %v", err)
	}
	return "", ""
}

// skipUnlessKernel skips (under CI: fails, unless accepted) when the
// real-kernel half cannot run here.
func skipUnlessKernel(t *testing.T) {
	t.Helper()
	if reason, msg := kernelSkipReason(t); reason != "" {
		kerneltest.Skip(t, reason, "%s", msg)
	}
}

// newKernelInFreshNamespace opens the real implementation in a new, empty
// network namespace that disappears when the test ends.
func newKernelInFreshNamespace(t testing.TB) Interface {
	t.Helper()
	a, _ := kernelInFreshNamespace(t)
	return a
}

func kernelInFreshNamespace(t testing.TB) (Interface, netns.NsHandle) {
	t.Helper()
	ns := netnstest.New(t)
	a, err := NewInNamespace(testDummy, ns)
	if err != nil {
		t.Fatalf("open netif in fresh namespace: %v", err)
	}
	t.Cleanup(func() { a.(*kernel).Close() })
	return a, ns
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
