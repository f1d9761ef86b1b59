// Package netnstest creates network namespaces for tests that touch the real
// kernel, and removes them when the test ends. It never changes the
// namespace the test runs in: only a locked thread switches in and back.
package netnstest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// New creates an anonymous network namespace. It lives as long as the
// returned handle (closed at the end of the test) or a socket opened inside.
func New(t testing.TB) netns.NsHandle {
	t.Helper()
	ns := create(t, func() (netns.NsHandle, error) { return netns.New() })
	t.Cleanup(func() { ns.Close() })
	return ns
}

// NewNamed creates a namespace bound at /run/netns/<prefix><random>, for
// tools that need a path (iptables-restore in the namespace, ip netns exec),
// and returns its handle and path. Both go at the end of the test.
func NewNamed(t testing.TB, prefix string) (netns.NsHandle, string) {
	t.Helper()
	buf := make([]byte, 4)
	if _, err := rand.Read(buf); err != nil {
		t.Fatal(err)
	}
	name := prefix + hex.EncodeToString(buf)
	if err := prepareRunNetns(); err != nil {
		t.Fatalf("prepare /run/netns: %v", err)
	}
	ns := create(t, func() (netns.NsHandle, error) { return netns.NewNamed(name) })
	t.Cleanup(func() {
		ns.Close()
		if err := netns.DeleteNamed(name); err != nil {
			t.Errorf("delete network namespace %s: %v", name, err)
		}
	})
	return ns, "/run/netns/" + name
}

// prepareRunNetns makes /run/netns a shared mount point of its own before a
// namespace is bound inside it, as `ip netns add` does on first use. Done
// later (by another process's first `ip netns add`), the recursive bind
// would copy bindings already there, and their files could no longer be
// removed. The lock keeps test processes of other packages from doing it
// twice at once.
func prepareRunNetns() error {
	if err := os.MkdirAll("/run/netns", 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile("/run/ipvsproxy-netnstest.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	err = unix.Mount("", "/run/netns", "none", unix.MS_SHARED|unix.MS_REC, "")
	if err != unix.EINVAL { // EINVAL: not a mount point yet
		return err
	}
	if err := unix.Mount("/run/netns", "/run/netns", "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	return unix.Mount("", "/run/netns", "none", unix.MS_SHARED|unix.MS_REC, "")
}

func create(t testing.TB, make func() (netns.NsHandle, error)) netns.NsHandle {
	t.Helper()
	var ns netns.NsHandle
	onThread(t, func() {
		var err error
		if ns, err = make(); err != nil {
			t.Fatalf("create network namespace: %v", err)
		}
	})
	return ns
}

// onThread runs do on a locked thread, then returns the thread to the
// namespace it started in, also when do fails the test. A thread that
// cannot return panics: the test would otherwise go on in the wrong
// namespace.
func onThread(t testing.TB, do func()) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("get current network namespace: %v", err)
	}
	defer orig.Close()
	defer func() {
		if err := netns.Set(orig); err != nil {
			panic(fmt.Sprintf("return to the original network namespace: %v", err))
		}
		runtime.UnlockOSThread()
	}()
	do()
}

// LoopbackUp brings lo up in ns and binds addrs to it (/32 or /128,
// without duplicate address detection), standing in for a node's own
// interfaces. IPv4 real servers need lo up: the kernel's ip_vs_new_dest()
// requires inet_addr_type() to say RTN_UNICAST, and in a namespace with no
// address at all it says RTN_BROADCAST (EINVAL).
func LoopbackUp(t testing.TB, ns netns.NsHandle, addrs ...netip.Addr) {
	t.Helper()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatalf("open rtnetlink in test namespace: %v", err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		t.Fatalf("bring lo up in test namespace: %v", err)
	}
	for _, a := range addrs {
		a = a.Unmap()
		prefix := &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}
		if err := h.AddrAdd(lo, &netlink.Addr{IPNet: prefix, Flags: unix.IFA_F_NODAD}); err != nil {
			t.Fatalf("bind %s to lo in test namespace: %v", a, err)
		}
	}
}

// In runs f on the calling goroutine, its thread switched into ns and back
// afterwards: sockets f opens stay in ns, and f may call t.Fatal.
func In(t testing.TB, ns netns.NsHandle, f func()) {
	t.Helper()
	onThread(t, func() {
		if err := netns.Set(ns); err != nil {
			t.Fatalf("enter test network namespace: %v", err)
		}
		f()
	})
}

// Open opens an adapter (what names it in a failure) inside a new network
// namespace with open, failing the test if it cannot, and closes it when the
// test ends, before the namespace goes, if it has a Close method.
func Open[A any](t testing.TB, what string, open func(netns.NsHandle) (A, error)) (A, netns.NsHandle) {
	t.Helper()
	ns := New(t)
	a, err := open(ns)
	if err != nil {
		t.Fatalf("open %s in a fresh network namespace: %v", what, err)
	}
	if c, ok := any(a).(interface{ Close() error }); ok {
		t.Cleanup(func() { c.Close() })
	}
	return a, ns
}

// Shell returns a function that runs a script with `sh -ec` inside the
// namespace NewNamed bound at path and returns its output; a script that
// fails fails the test, with its output.
func Shell(t testing.TB, path string) func(script string) string {
	name := strings.TrimPrefix(path, "/run/netns/")
	return func(script string) string {
		t.Helper()
		out, err := exec.Command("ip", "netns", "exec", name, "sh", "-ec", script).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
		return string(out)
	}
}

// Handle is an rtnetlink handle inside ns, closed when the test ends.
func Handle(t testing.TB, ns netns.NsHandle) *netlink.Handle {
	t.Helper()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatalf("open rtnetlink in test namespace: %v", err)
	}
	t.Cleanup(h.Close)
	return h
}

// Veth joins two test namespaces with a veth pair, the end a in ns a and
// the end b in ns b, binds each end's prefixes ("192.0.2.1/24") and brings
// both up. Without prefixes an end has its IPv6 link-local address only.
func Veth(t testing.TB, a netns.NsHandle, aName string, aPrefixes []string, b netns.NsHandle, bName string, bPrefixes []string) {
	t.Helper()
	ah := Handle(t, a)
	if err := ah.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: aName}, PeerName: bName, PeerNamespace: netlink.NsFd(int(b))}); err != nil {
		t.Fatalf("add veth %s-%s: %v", aName, bName, err)
	}
	for _, end := range []struct {
		h        *netlink.Handle
		name     string
		prefixes []string
	}{{ah, aName, aPrefixes}, {Handle(t, b), bName, bPrefixes}} {
		l, err := end.h.LinkByName(end.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range end.prefixes {
			addr, err := netlink.ParseAddr(p)
			if err != nil {
				t.Fatalf("%s on %s: %v", p, end.name, err)
			}
			if err := end.h.AddrAdd(l, addr); err != nil {
				t.Fatalf("%s on %s: %v", p, end.name, err)
			}
		}
		if err := end.h.LinkSetUp(l); err != nil {
			t.Fatalf("bring %s up: %v", end.name, err)
		}
	}
}
