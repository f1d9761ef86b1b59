package ipvsproxy

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
)

// Unroutable says why range r must not become local on this node, or "".
// A range holding a node address, or overlapping the pod network or
// --ipvs-exclude-cidrs, would capture traffic that is not for a Service.
func Unroutable(r netip.Prefix, cfg Config, host []netip.Addr) string {
	if r.Bits() == 0 {
		return "a /0 range would make every address local"
	}
	for _, a := range host {
		if r.Contains(a.Unmap()) {
			return fmt.Sprintf("it contains the node address %s", a)
		}
	}
	for _, c := range cfg.ClusterCIDRs {
		if c.Overlaps(r) {
			return fmt.Sprintf("it overlaps the cluster CIDR %s", c)
		}
	}
	for _, c := range cfg.ExcludeCIDRs {
		if c.Overlaps(r) {
			return fmt.Sprintf("it overlaps the excluded CIDR %s", c)
		}
	}
	return ""
}

// routedBy is the routed Service CIDR that holds addr, if any.
func (n NodeInfo) routedBy(addr netip.Addr) (netip.Prefix, bool) {
	for _, p := range n.RoutedServiceCIDRs {
		if p.Contains(addr) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// AnchorAddress is the address bound on kube-ipvs0 for an IPv4 range while
// it is routed: when the last IPv4 address leaves a link the kernel flushes
// every IPv4 route through it (fib_disable_ip), so the link always keeps
// one. The network address is never allocated to a Service. IPv6 routes
// survive without addresses; none is needed.
func AnchorAddress(r netip.Prefix) (netip.Addr, bool) {
	return r.Addr(), r.Addr().Is4()
}

// setServiceRoutes replaces the routed ranges of the desired state: the
// routes themselves, their anchor addresses and their KUBE-SERVICE-CIDRS
// members, recording in t what may have changed.
func (d *DesiredState) setServiceRoutes(ranges []netip.Prefix, t Touched) {
	contribution := func(r netip.Prefix) (netip.Addr, bool, SetEntryKey) {
		a, anchored := AnchorAddress(r)
		return a, anchored, SetEntryKey{Set: owned.SetName(owned.SetServiceCIDRs, FamilyOf(r.Addr())), Entry: ipset.Entry{Net: r}}
	}
	for _, r := range d.Routes {
		a, anchored, e := contribution(r)
		if anchored {
			if d.addrRefs[a]--; d.addrRefs[a] <= 0 {
				delete(d.addrRefs, a)
			}
			t.address(a)
			k := SetEntryKey{Set: owned.SetName(owned.SetIPVSIPs, FamilyOf(a)), Entry: ipset.Entry{IP: a}}
			d.countEntry(k, -1)
			t.entry(k)
		}
		d.countEntry(e, -1)
		t.entry(e)
	}
	d.Routes = slices.Clone(ranges)
	for _, r := range d.Routes {
		a, anchored, e := contribution(r)
		if anchored {
			d.addrRefs[a]++
			t.address(a)
			k := SetEntryKey{Set: owned.SetName(owned.SetIPVSIPs, FamilyOf(a)), Entry: ipset.Entry{IP: a}}
			d.countEntry(k, +1)
			t.entry(k)
		}
		d.countEntry(e, +1)
		t.entry(e)
	}
}
