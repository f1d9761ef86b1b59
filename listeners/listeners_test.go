package listeners

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
	"github.com/vishvananda/netns"
)

// The sockets every subject holds: what `ss -ltun` would list, and nothing
// for the connected UDP socket and the accepted TCP connection opened beside
// them in the kernel's namespace.
var want = []Listener{
	{TCP, netip.MustParseAddr("198.51.100.1"), 2222},
	{TCP, netip.MustParseAddr("::"), 10250},
	{UDP, netip.MustParseAddr("0.0.0.0"), 5353},
	{UDP, netip.MustParseAddr("2001:db8::1"), 53},
}

func subjects(t *testing.T) map[string]func(t *testing.T) Interface {
	return map[string]func(t *testing.T) Interface{
		"fake":   func(t *testing.T) Interface { return NewFake(want...) },
		"kernel": kernelSubject,
	}
}

func TestListening(t *testing.T) {
	for name, subject := range subjects(t) {
		t.Run(name, func(t *testing.T) {
			got, err := subject(t).Listening()
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(Normalize(append([]Listener(nil), want...))) {
				t.Errorf("listening:\n got %v\nwant %v", got, Normalize(append([]Listener(nil), want...)))
			}
		})
	}
}

func TestCovers(t *testing.T) {
	ap := netip.MustParseAddrPort
	for _, c := range []struct {
		l    Listener
		p    Protocol
		to   netip.AddrPort
		want bool
	}{
		{Listener{TCP, netip.MustParseAddr("0.0.0.0"), 22}, TCP, ap("198.51.100.1:22"), true},
		{Listener{TCP, netip.MustParseAddr("0.0.0.0"), 22}, TCP, ap("[2001:db8::1]:22"), false},
		{Listener{TCP, netip.MustParseAddr("::"), 22}, TCP, ap("198.51.100.1:22"), true},
		{Listener{TCP, netip.MustParseAddr("198.51.100.1"), 22}, TCP, ap("198.51.100.2:22"), false},
		{Listener{TCP, netip.MustParseAddr("198.51.100.1"), 22}, UDP, ap("198.51.100.1:22"), false},
		{Listener{UDP, netip.MustParseAddr("2001:db8::1"), 53}, UDP, ap("[2001:db8::1]:53"), true},
	} {
		if got := c.l.Covers(c.p, c.to); got != c.want {
			t.Errorf("%v covers %s %v: %v, want %v", c.l, c.p, c.to, got, c.want)
		}
	}
}

// kernelSubject opens want's sockets, a connected UDP socket and an accepted
// TCP connection in a fresh namespace, and reads it.
func kernelSubject(t *testing.T) Interface {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.NotRoot, "need root to create a network namespace")
	}
	ns := netnstest.New(t)
	netnstest.LoopbackUp(t, ns, netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("2001:db8::1"))
	inNamespace(t, ns, func() {
		for _, l := range want {
			addr := netip.AddrPortFrom(l.Addr, l.Port).String()
			// A wildcard "tcp" socket in Go is an IPv6 one that takes IPv4 too:
			// name the family, as the kernel lists the socket by it.
			family := "4"
			if l.Addr.Is6() {
				family = "6"
			}
			if l.Protocol == TCP {
				ln, err := net.Listen("tcp"+family, addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { ln.Close() })
			} else {
				pc, err := net.ListenPacket("udp"+family, addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { pc.Close() })
			}
		}
		connected, err := net.Dial("udp", "198.51.100.1:5353")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { connected.Close() })
		client, err := net.Dial("tcp", "198.51.100.1:2222")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close() })
	})
	return NewInNamespace(int(ns))
}

// inNamespace runs f on a thread switched into ns; sockets f opens stay there.
func inNamespace(t *testing.T, ns netns.NsHandle, f func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			panic(fmt.Sprintf("return to the original namespace: %v", err))
		}
	}()
	f()
}
