// Package netns prepares the private network namespace a benchmark process
// runs in (the harness starts each one under `unshare --net`): loopback up
// with the node's address, and an ifb link named kube-ipvs0 standing in for
// the dummy one on kernels without the dummy driver. Both proxiers then
// bind addresses (and ipvsproxy adds its routes) over real netlink, and
// nothing leaves the namespace.
package netns

import (
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
)

// Prepare sets the namespace up; link "" creates no ifb. It refuses to run in the host's namespace:
// the process must have been started in a fresh one.
func Prepare(node netip.Addr, link string) error {
	if os.Getenv("IPVSPROXY_BENCH_NETNS") != "private" {
		return fmt.Errorf("not in a private network namespace: run under `unshare --net` with IPVSPROXY_BENCH_NETNS=private")
	}
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("set lo up: %w", err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: node.AsSlice(), Mask: net.CIDRMask(32, 32)}}
	if err := netlink.AddrAdd(lo, addr); err != nil {
		return fmt.Errorf("bind %s on lo: %w", node, err)
	}
	if link == "" {
		return nil // a kernel with the dummy driver: the proxier creates it
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = link
	if err := netlink.LinkAdd(&netlink.Ifb{LinkAttrs: attrs}); err != nil {
		return fmt.Errorf("create ifb %s: %w", link, err)
	}
	l, err := netlink.LinkByName(link)
	if err != nil {
		return err
	}
	_ = netlink.LinkSetIP6AddrGenMode(l, nl.IN6_ADDR_GEN_MODE_NONE)
	return netlink.LinkSetUp(l)
}
