package listeners

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
	"golang.org/x/sys/unix"
)

// The sockets every subject holds: what `ss -ltun` would list, and the two
// connected UDP sockets (a resolver's query: a virtual server on their
// address and port would take their peers' replies); nothing for the TCP
// connection opened beside them in the kernel's namespace (IPVS schedules
// only a connection's first packet, so its replies are safe).
var want = []Listener{
	{TCP, netip.MustParseAddr("198.51.100.1"), 2222},
	{TCP, netip.MustParseAddr("::"), 10250},
	{UDP, netip.MustParseAddr("0.0.0.0"), 5353},
	{UDP, netip.MustParseAddr("2001:db8::1"), 53},
	{UDP, netip.MustParseAddr("198.51.100.1"), 40053}, // connected to 198.51.100.1:5353
	{UDP, netip.MustParseAddr("2001:db8::1"), 40054},  // connected to [2001:db8::1]:53
}

// connectedUDP are the local and remote ends of want's connected sockets.
var connectedUDP = map[string]string{"198.51.100.1:40053": "198.51.100.1:5353", "[2001:db8::1]:40054": "[2001:db8::1]:53"}

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
			if fmt.Sprint(got) != fmt.Sprint(normalize(append([]Listener(nil), want...))) {
				t.Errorf("listening:\n got %v\nwant %v", got, normalize(append([]Listener(nil), want...)))
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
	netnstest.In(t, ns, func() {
		for _, l := range want {
			if _, ok := connectedUDP[netip.AddrPortFrom(l.Addr, l.Port).String()]; ok {
				continue
			}
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
		for local, remote := range connectedUDP {
			connected, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(local)), net.UDPAddrFromAddrPort(netip.MustParseAddrPort(remote)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { connected.Close() })
		}
		client, err := net.Dial("tcp", "198.51.100.1:2222")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close() })
	})
	return NewInNamespace(int(ns))
}

// SCTP listeners are read from /proc/net/sctp/eps (sctp.go): one per bound
// address, only those in LISTEN, IPv6 in the kernel's uncompressed form.
func TestParseSCTPEndpoints(t *testing.T) {
	eps := ` ENDPT     SOCK   STY SST HBKT LPORT   UID INODE LADDRS
00000000 00000000 1   10  31   9999      0 20417 0.0.0.0 
00000000 00000000 2   10  8    36412     0 20533 198.51.100.1 198.51.100.2 
00000000 00000000 1   10  12   3868      0 20601 2001:0db8:0000:0000:0000:0000:0000:0001 
00000000 00000000 1   7   40   40000     0 20602 198.51.100.1 
00000000 00000000 1   10  5    2905      0 20603 0000:0000:0000:0000:0000:0000:0000:0000 
`
	got, err := parseSCTPEndpoints(strings.NewReader(eps))
	if err != nil {
		t.Fatal(err)
	}
	wantSCTP := []Listener{
		{SCTP, netip.MustParseAddr("0.0.0.0"), 9999},
		{SCTP, netip.MustParseAddr("198.51.100.1"), 36412},
		{SCTP, netip.MustParseAddr("198.51.100.2"), 36412},
		{SCTP, netip.MustParseAddr("2001:db8::1"), 3868},
		{SCTP, netip.MustParseAddr("::"), 2905},
	}
	if fmt.Sprint(normalize(got)) != fmt.Sprint(normalize(wantSCTP)) {
		t.Errorf("got %v\nwant %v", normalize(got), normalize(wantSCTP))
	}
	for _, bad := range []string{"00000000 00000000 1 10 31 9999 0\n", "00000000 00000000 1 x 31 9999 0 1 0.0.0.0\n", "00000000 00000000 1 10 31 9999 0 1 not-an-address\n"} {
		if _, err := parseSCTPEndpoints(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// An SCTP socket in LISTEN is listed, bound to one address or to all, in
// both families; one that is not listening yet is not. On a kernel
// without SCTP (this host's) the file is absent and the list empty; `make
// vm-test` runs it where SCTP is.
func TestListeningSCTP(t *testing.T) {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.NotRoot, "need root to create a network namespace")
	}
	ns := netnstest.New(t)
	netnstest.LoopbackUp(t, ns, netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("2001:db8::1"))
	table := NewInNamespace(int(ns))
	var sctpErr error
	netnstest.In(t, ns, func() {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP)
		if err != nil {
			sctpErr = err
			return
		}
		unix.Close(fd)
	})
	if sctpErr != nil {
		if got, err := table.Listening(); err != nil || slices.ContainsFunc(got, func(l Listener) bool { return l.Protocol == SCTP }) {
			t.Errorf("without SCTP: %v, %v; want no SCTP listener and no error", got, err)
		}
		kerneltest.Skip(t, kerneltest.NoSCTP, "no SCTP socket: %v", sctpErr)
	}
	wantSCTP := []Listener{
		{SCTP, netip.MustParseAddr("198.51.100.1"), 3868},
		{SCTP, netip.MustParseAddr("::"), 2905},
	}
	netnstest.In(t, ns, func() {
		for _, l := range append(wantSCTP, Listener{SCTP, netip.MustParseAddr("198.51.100.1"), 9999}) {
			family, sa := unix.AF_INET6, unix.Sockaddr(&unix.SockaddrInet6{Port: int(l.Port), Addr: l.Addr.As16()})
			if l.Addr.Is4() {
				family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: int(l.Port), Addr: l.Addr.As4()}
			}
			fd, err := unix.Socket(family, unix.SOCK_STREAM, unix.IPPROTO_SCTP)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(fd) })
			if err := unix.Bind(fd, sa); err != nil {
				t.Fatalf("bind %v: %v", l, err)
			}
			if l.Port == 9999 {
				continue // bound, not listening
			}
			if err := unix.Listen(fd, 8); err != nil {
				t.Fatalf("listen %v: %v", l, err)
			}
		}
	})
	got, err := table.Listening()
	if err != nil {
		t.Fatal(err)
	}
	var sctp []Listener
	for _, l := range got {
		if l.Protocol == SCTP {
			sctp = append(sctp, l)
		}
	}
	if fmt.Sprint(sctp) != fmt.Sprint(normalize(wantSCTP)) {
		t.Errorf("SCTP listeners %v, want %v", sctp, normalize(wantSCTP))
	}
}
