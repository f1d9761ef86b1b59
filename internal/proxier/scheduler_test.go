package proxier

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/hostsetup"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The scheduler fallback (twos to wrr) is chosen by measurement, not by
// belief: TestSchedulerSpreadOnRealKernel sends new TCP connections through a
// real IPVS virtual server to three real servers in their own namespaces
// and counts, at each server, which one each connection reached. Its log is
// the table in docs/scheduler.md.

// schedulerCandidates are the kernel's schedulers worth comparing with twos
// (weighted random twos choice, Linux 5.12).
var schedulerCandidates = []string{"twos", "rr", "wrr", "lc", "wlc", "sed", "nq", "sh", "mh", "dh", "lblc", "lblcr", "fo", "ovf"}

// spreadLab is one node namespace with IPVS and three server namespaces,
// each reached over a veth pair: 192.0.2.{4k+1} (node side) and
// 192.0.2.{4k+2} (server k) for k = 0, 1, 2. The client is the node itself
// (a node process calling a cluster IP), from clientSources bound on lo.
type spreadLab struct {
	node     netns.NsHandle
	ipvs     ipvs.Interface
	servers  []netip.Addr
	accepted []atomic.Int64
	sources  []netip.Addr
}

const spreadPort = 8080

var spreadVIP = netip.MustParseAddr("203.0.113.10")

func newSpreadLab(t *testing.T) *spreadLab {
	t.Helper()
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.NotRoot, "needs root")
	}
	lab := &spreadLab{accepted: make([]atomic.Int64, 3)}
	lab.node = netnstest.New(t)
	// Many client addresses, so that hashing schedulers (sh, mh) show how
	// they spread many clients; the VIP on lo makes it local, as kube-ipvs0 does.
	addrs := []netip.Addr{spreadVIP}
	for i := 0; i < 30; i++ {
		a := netip.AddrFrom4([4]byte{198, 51, 100, byte(100 + i)})
		lab.sources = append(lab.sources, a)
		addrs = append(addrs, a)
	}
	netnstest.LoopbackUp(t, lab.node, addrs...)
	var err error
	if lab.ipvs, err = ipvs.NewInNamespace(lab.node); err != nil {
		if errors.Is(err, ipvs.ErrUnsupported) {
			kerneltest.Skip(t, kerneltest.NoIPVS, "%v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.ipvs.Close() })
	nh, err := netlink.NewHandleAt(lab.node, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	for k := 0; k < 3; k++ {
		srv := netnstest.New(t)
		netnstest.LoopbackUp(t, srv)
		nodeSide := netip.AddrFrom4([4]byte{192, 0, 2, byte(4*k + 1)})
		srvSide := netip.AddrFrom4([4]byte{192, 0, 2, byte(4*k + 2)})
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("rs%d", k)}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(srv))}
		if err := nh.LinkAdd(veth); err != nil {
			t.Fatalf("add veth rs%d: %v", k, err)
		}
		configureLink(t, nh, veth.Name, nodeSide)
		sh, err := netlink.NewHandleAt(srv, unix.NETLINK_ROUTE)
		if err != nil {
			t.Fatal(err)
		}
		configureLink(t, sh, "eth0", srvSide)
		if err := sh.RouteAdd(&netlink.Route{Dst: &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, Gw: nodeSide.AsSlice()}); err != nil {
			t.Fatalf("default route in server %d: %v", k, err)
		}
		sh.Close()
		ln := listenIn(t, srv, netip.AddrPortFrom(srvSide, spreadPort))
		lab.servers = append(lab.servers, srvSide)
		counter := &lab.accepted[k]
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				counter.Add(1)
				c.Close()
			}
		}()
	}
	return lab
}

func configureLink(t *testing.T, h *netlink.Handle, name string, addr netip.Addr) {
	t.Helper()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatalf("find %s: %v", name, err)
	}
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(30, 32)}}); err != nil {
		t.Fatalf("address %s on %s: %v", addr, name, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		t.Fatalf("bring %s up: %v", name, err)
	}
}

func listenIn(t *testing.T, ns netns.NsHandle, at netip.AddrPort) net.Listener {
	t.Helper()
	var ln net.Listener
	var err error
	netnstest.In(t, ns, func() { ln, err = net.Listen("tcp", at.String()) })
	if err != nil {
		t.Fatalf("listen on %s: %v", at, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// spread is what one scheduler did with n new connections.
type spread struct {
	counts   [3]int
	failed   int    // connections that failed twice
	retried  int    // connections whose first attempt failed
	firstErr string // the first attempt's error, for the log
}

func (s spread) String() string {
	out := fmt.Sprintf("%d/%d/%d failed %d", s.counts[0], s.counts[1], s.counts[2], s.failed)
	if s.retried > 0 {
		out += fmt.Sprintf(" (retried %d: %s)", s.retried, s.firstErr)
	}
	return out
}

// connect opens n connections to the VIP, one after the other, source
// address i mod len(sources), and returns how many each server accepted.
func (lab *spreadLab) connect(t *testing.T, n int) spread {
	t.Helper()
	var before [3]int64
	for k := range lab.accepted {
		before[k] = lab.accepted[k].Load()
	}
	var out spread
	netnstest.In(t, lab.node, func() {
		for i := 0; i < n; i++ {
			// 5 s: a SYN the emulated guest drops under load is sent again
			// after 1 s and 3 s. A loaded 2-core host once starved the guest
			// past that (1 of 300 failed at load average 17): a failed
			// connection is tried once more, counted and printed, and fails
			// the test only when the second attempt fails too; the spread,
			// not the handshake, is tested.
			d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: lab.sources[i%len(lab.sources)].AsSlice()}}
			c, err := d.Dial("tcp", netip.AddrPortFrom(spreadVIP, 80).String())
			if err != nil {
				if out.retried == 0 {
					out.firstErr = err.Error()
				}
				out.retried++
				c, err = d.Dial("tcp", netip.AddrPortFrom(spreadVIP, 80).String())
			}
			if err != nil {
				out.failed++
				continue
			}
			c.Close()
		}
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		total := 0
		for k := range lab.accepted {
			out.counts[k] = int(lab.accepted[k].Load() - before[k])
			total += out.counts[k]
		}
		if total+out.failed >= n || time.Now().After(deadline) {
			return out
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// measure programs one virtual server with scheduler, spreads n
// connections over three weight-1 servers, then n more with server 2 at
// weight 0 (a draining endpoint).
func (lab *spreadLab) measure(t *testing.T, scheduler string, n int) (even, drained spread, err error) {
	t.Helper()
	key := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: spreadVIP, Port: 80}
	if err := lab.ipvs.AddVirtualServer(ipvs.VirtualServer{VirtualServerKey: key, Scheduler: scheduler}); err != nil {
		return even, drained, err
	}
	defer lab.ipvs.DeleteVirtualServer(key)
	for _, a := range lab.servers {
		if err := lab.ipvs.AddRealServer(key, ipvs.RealServer{RealServerKey: ipvs.RealServerKey{Address: a, Port: spreadPort}, Weight: 1}); err != nil {
			return even, drained, err
		}
	}
	even = lab.connect(t, n)
	if err := lab.ipvs.UpdateRealServer(key, ipvs.RealServer{RealServerKey: ipvs.RealServerKey{Address: lab.servers[2], Port: spreadPort}, Weight: 0}); err != nil {
		return even, drained, err
	}
	drained = lab.connect(t, n)
	return even, drained, nil
}

// TestSchedulerSpreadOnRealKernel measures every candidate scheduler and
// checks the two the proxier relies on: twos (the default) and
// FallbackScheduler each give every one of three servers a fair share
// (within [n/6, n/2], expected n/3) and send no new connection to a server
// at weight 0.
func TestSchedulerSpreadOnRealKernel(t *testing.T) {
	lab := newSpreadLab(t)
	const n = 300
	var mu sync.Mutex
	var table strings.Builder
	fmt.Fprintf(&table, "| scheduler | %d connections, weights 1/1/1 | %d more, weights 1/1/0 |\n| --- | --- | --- |\n", n, n)
	for _, s := range schedulerCandidates {
		even, drained, err := lab.measure(t, s, n)
		mu.Lock()
		if errors.Is(err, ipvs.ErrNoScheduler) {
			fmt.Fprintf(&table, "| %s | not in this kernel | |\n", s)
			mu.Unlock()
			continue
		}
		if err != nil {
			mu.Unlock()
			t.Fatalf("%s: %v", s, err)
		}
		fmt.Fprintf(&table, "| %s | %s | %s |\n", s, even, drained)
		mu.Unlock()
		if s != ipvsproxy.DefaultScheduler && s != hostsetup.FallbackScheduler {
			continue
		}
		for k, c := range even.counts {
			if c < n/6 || c > n/2 || even.failed > 0 {
				t.Errorf("%s: server %d got %d of %d new connections (%s), want %d..%d", s, k, c, n, even, n/6, n/2)
			}
		}
		if drained.counts[2] != 0 || drained.failed > 0 || drained.counts[0] < n/4 || drained.counts[1] < n/4 {
			t.Errorf("%s with server 2 at weight 0: %s; want none to server 2 and the rest shared", s, drained)
		}
	}
	t.Logf("spread of new TCP connections from %d client addresses over three real servers:\n%s", len(lab.sources), table.String())
}
