package hostsetup

import (
	"encoding/binary"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/nsthread"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/sysctl"
	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// ipvsOnFake serves the IPVS sysctls (net.ipv4.vs.*) from a fake, since
// this host's kernel has no IPVS, and every other one from the real
// /proc/sys of the thread that asks: what Prepare writes beyond IPVS lands
// in the kernel.
type ipvsOnFake struct {
	real sysctl.Interface
	ipvs *sysctl.Fake
}

func (s ipvsOnFake) pick(name string) sysctl.Interface {
	if strings.HasPrefix(name, "net.ipv4.vs.") {
		return s.ipvs
	}
	return s.real
}
func (s ipvsOnFake) Get(name string) (string, error) { return s.pick(name).Get(name) }
func (s ipvsOnFake) Set(name, value string) error    { return s.pick(name).Set(name, value) }

// A dual-stack node whose uplink takes its IPv6 default route from router
// advertisements (accept_ra=1, SLAAC) keeps it with the proxier's host
// set-up applied, on this host's kernel: a router namespace sends real
// Router Advertisements over a veth pair, and the node namespace, after
// Prepare, installs `default via fe80::… proto ra`. Prepare once set
// net.ipv6.conf.all.forwarding=1, and a forwarding interface with
// accept_ra=1 ignores router advertisements: the node lost its IPv6 uplink
// when the route expired. kube-proxy leaves IPv6 forwarding alone; so does
// Prepare now, and says so when it is off.
func TestRouterAdvertisementsStillConfigureTheNodeAfterPrepare(t *testing.T) {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.NotRoot, "needs root")
	}
	node, router := netnstest.New(t), netnstest.New(t)
	// No duplicate address detection: the link-local addresses are usable
	// at once (the router sends from its own).
	for _, ns := range []netns.NsHandle{node, router} {
		writeSysctls(t, ns, map[string]string{"ipv6/conf/default/accept_dad": "0", "ipv6/conf/all/accept_dad": "0"})
	}
	netnstest.Veth(t, node, "eth0", nil, router, "r0", nil)
	netnstest.LoopbackUp(t, node)
	netnstest.LoopbackUp(t, router)
	// The node's uplink as a SLAAC host has it.
	writeSysctls(t, node, map[string]string{"ipv6/conf/eth0/accept_ra": "1", "ipv6/conf/eth0/forwarding": "0", "ipv6/conf/all/forwarding": "0"})

	// The proxier's host set-up, in the node's namespace, proxying IPv6.
	cfg := ipvsproxy.DefaultConfig()
	cfg.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	var prepErr error
	if err := nsthread.Do(node, func() {
		// The dummy link on the fake: this kernel has no dummy driver.
		k := adapters.Kernel{Netif: netif.NewFake(owned.DummyInterface), IPVS: ipvs.NewFake(), Sysctl: ipvsOnFake{real: sysctl.New(), ipvs: ipvsSysctlsFake()}}
		_, prepErr = Prepare(cfg, k, "6.12.38+deb12-amd64")
	}); err != nil {
		t.Fatal(err)
	}
	if prepErr != nil {
		t.Fatalf("Prepare in the node namespace: %v", prepErr)
	}
	t.Logf("after Prepare: %v", readSysctls(t, node, "ipv6/conf/all/forwarding", "ipv6/conf/eth0/forwarding", "ipv6/conf/eth0/accept_ra", "ipv4/ip_forward"))

	nh, rh := netnstest.Handle(t, node), netnstest.Handle(t, router)
	r0, err := rh.LinkByName("r0")
	if err != nil {
		t.Fatal(err)
	}
	ra := routerAdvertisement(netip.MustParsePrefix("2001:db8:1::/64"))
	var fd int
	var sockErr error
	if err := nsthread.Do(router, func() { fd, sockErr = raSocket(r0.Attrs().Index) }); err != nil || sockErr != nil {
		t.Fatalf("router's ICMPv6 socket: %v %v", err, sockErr)
	}
	defer unix.Close(fd)
	allNodes := &unix.SockaddrInet6{Addr: netip.MustParseAddr("ff02::1").As16(), ZoneId: uint32(r0.Attrs().Index)}

	var found *netlink.Route
	deadline := time.Now().Add(10 * time.Second)
	for found == nil && time.Now().Before(deadline) {
		// Until the router's link-local address exists (the veth's carrier
		// comes up a moment after the link) there is no source to send from.
		if err := unix.Sendto(fd, ra, 0, allNodes); err != nil && err != unix.EADDRNOTAVAIL {
			t.Fatalf("send a router advertisement: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
		routes, err := nh.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Protocol: unix.RTPROT_RA}, netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range routes {
			if r.Dst == nil || r.Dst.IP.IsUnspecified() {
				found = &routes[i]
			}
		}
	}
	if found == nil {
		t.Fatalf("no IPv6 default route from the router advertisements within 10 s (%v): the node ignores them", readSysctls(t, node, "ipv6/conf/all/forwarding", "ipv6/conf/eth0/forwarding", "ipv6/conf/eth0/accept_ra"))
	}
	t.Logf("the node's default route: via %s dev eth0 proto ra", found.Gw)
	if !found.Gw.IsLinkLocalUnicast() {
		t.Errorf("default route via %s, want the router's link-local address", found.Gw)
	}
}

// routerAdvertisement is an ICMPv6 Router Advertisement (RFC 4861 4.2)
// with a router lifetime of 30 minutes and prefix, on-link and autonomous;
// the kernel fills in the checksum of a raw ICMPv6 socket.
func routerAdvertisement(prefix netip.Prefix) []byte {
	b := []byte{134, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint16(b[6:], 1800) // router lifetime, seconds
	opt := make([]byte, 32)
	opt[0], opt[1] = 3, 4 // prefix information, 4 × 8 bytes
	opt[2] = byte(prefix.Bits())
	opt[3] = 0xc0 // on-link, autonomous
	binary.BigEndian.PutUint32(opt[4:], 86400)
	binary.BigEndian.PutUint32(opt[8:], 14400)
	a := prefix.Addr().As16()
	copy(opt[16:], a[:])
	return append(b, opt...)
}

// raSocket is a raw ICMPv6 socket that sends to link-local multicast on
// ifindex with hop limit 255, as a router does (the receiver drops any
// other).
func raSocket(ifindex int) (int, error) {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMPV6)
	if err != nil {
		return -1, err
	}
	for _, o := range [][2]int{{unix.IPV6_MULTICAST_HOPS, 255}, {unix.IPV6_UNICAST_HOPS, 255}, {unix.IPV6_MULTICAST_IF, ifindex}} {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, o[0], o[1]); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}

// writeSysctls sets /proc/sys/net/NAME=VALUE in ns.
func writeSysctls(t *testing.T, ns netns.NsHandle, values map[string]string) {
	t.Helper()
	var errs []error
	if err := nsthread.Do(ns, func() {
		for name, value := range values {
			if err := os.WriteFile(filepath.Join("/proc/sys/net", name), []byte(value), 0o644); err != nil {
				errs = append(errs, err)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if len(errs) > 0 {
		t.Fatal(errs)
	}
}

// readSysctls reads /proc/sys/net/NAME in ns, as "NAME=VALUE".
func readSysctls(t *testing.T, ns netns.NsHandle, names ...string) []string {
	t.Helper()
	var out []string
	if err := nsthread.Do(ns, func() {
		for _, name := range names {
			b, err := os.ReadFile(filepath.Join("/proc/sys/net", name))
			out = append(out, name+"="+strings.TrimSpace(string(b))+errText(err))
		}
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func errText(err error) string {
	if err != nil {
		return " (" + err.Error() + ")"
	}
	return ""
}
