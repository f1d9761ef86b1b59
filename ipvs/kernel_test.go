package ipvs

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"

	mobyipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

var (
	modprobeOnce sync.Once
	modprobeOut  string
)

// kernelSkipReason says why the real-kernel half of the adapter table
// cannot run here, or "" when it can. It loads ip_vs once if needed.
func kernelSkipReason() string {
	if os.Geteuid() != 0 {
		return "real-kernel IPVS tests need root to create a network namespace"
	}
	err := checkAvailable()
	if errors.Is(err, ErrUnsupported) {
		modprobeOnce.Do(func() {
			out, err := exec.Command("modprobe", "ip_vs").CombinedOutput()
			if err != nil {
				modprobeOut = strings.TrimSpace(string(out)) + ": " + err.Error()
			}
		})
		err = checkAvailable()
	}
	if err != nil {
		return "kernel has no IPVS (modprobe ip_vs: " + modprobeOut + "): " + err.Error()
	}
	return ""
}

// newKernelInFreshNamespace opens the real IPVS table of a new, empty network
// namespace that disappears when the test ends.
func newKernelInFreshNamespace(t *testing.T) Interface {
	t.Helper()
	ns := freshNamespace(t)
	a, err := NewInNamespace(ns)
	if err != nil {
		t.Fatalf("open IPVS in fresh namespace: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// freshNamespace creates a network namespace without entering it: only the
// locked thread switches in and straight back. The namespace lives as long as
// the returned handle or a socket opened inside it.
func freshNamespace(t *testing.T) netns.NsHandle {
	t.Helper()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("get current network namespace: %v", err)
	}
	defer orig.Close()
	ns, err := netns.New()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("create network namespace: %v", err)
	}
	if err := netns.Set(orig); err != nil {
		// Leave the thread locked: the runtime then discards it instead of
		// reusing a thread stuck in the test namespace.
		t.Fatalf("return to original network namespace: %v", err)
	}
	runtime.UnlockOSThread()
	t.Cleanup(func() { ns.Close() })
	// IPv4 real servers need a routing table to exist: ip_vs_new_dest()
	// requires inet_addr_type() to say RTN_UNICAST, and in a namespace with
	// no address at all it says RTN_BROADCAST (EINVAL). Any real node has
	// addresses; here, bringing lo up (127.0.0.1) is enough.
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
	return ns
}

// A firewall-mark service has no address or port to report; listing leaves
// it out rather than inventing a key. Kernel only: Fake cannot hold one.
func TestKernelListsNoFirewallMarkServices(t *testing.T) {
	if reason := kernelSkipReason(); reason != "" {
		t.Skip(reason)
	}
	a := newKernelInFreshNamespace(t)
	k := a.(*kernel)
	fwmark := &mobyipvs.Service{FWMark: 7, AddressFamily: unix.AF_INET, SchedName: "rr", Netmask: 0xffffffff}
	if err := k.handle.NewService(fwmark); err != nil {
		t.Fatalf("add firewall-mark service: %v", err)
	}
	ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
	wantVirtualServers(t, a, VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"})
}
