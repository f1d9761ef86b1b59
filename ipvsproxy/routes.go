package ipvsproxy

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/netif"
	"k8s.io/klog/v2"
)

// Service CIDRs are made local with one `local` route each on kube-ipvs0
// instead of one bound address per cluster IP: every RTM_NEWADDR walks the
// link's address list, so binding N cluster IPs costs O(N²) in the kernel
// (3.3 s for 10,000 here, 37 s for 20,000). A cluster IP inside a
// routed range is then not bound; external and load balancer IPs still are.
// KUBE-SERVICE-CIDRS holds the ranges so that KUBE-IPVS-FILTER rejects new
// connections to their unused addresses, as it does for bound ones.

// routedServiceCIDRs decides which Service CIDRs get a route: the flag's
// and the ServiceCIDR objects' ranges of the proxied families, except one
// that would make more local than Service IPs. Those are refused (logged
// once) and their cluster IPs bound one by one as before.
func (p *Proxier) routedServiceCIDRs(host []netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	refused := map[netip.Prefix]string{}
	for _, r := range sortedPrefixes(append(slices.Clone(p.cfg.ServiceCIDRs), p.tracker.ServiceCIDRRanges()...)) {
		r = r.Masked()
		if !p.cfg.hasFamily(familyOf(r.Addr())) {
			continue
		}
		if why := unroutable(r, p.cfg, host); why != "" {
			refused[r] = why
			continue
		}
		out = append(out, r)
	}
	if !maps.Equal(refused, p.refusedRanges) {
		for r, why := range refused {
			klog.ErrorS(nil, "Not routing a Service CIDR; its cluster IPs are bound one by one", "cidr", r, "reason", why)
		}
		p.refusedRanges = refused
	}
	return out
}

// unroutable says why range r must not become local on this node, or "".
// A range holding a node address, or overlapping the pod network or
// --ipvs-exclude-cidrs, would capture traffic that is not for a Service.
func unroutable(r netip.Prefix, cfg Config, host []netip.Addr) string {
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

// anchorAddress is the address bound on kube-ipvs0 for an IPv4 range while
// it is routed: when the last IPv4 address leaves a link the kernel flushes
// every IPv4 route through it (fib_disable_ip), so the link always keeps
// one. The network address is never allocated to a Service. IPv6 routes
// survive without addresses; none is needed.
func anchorAddress(r netip.Prefix) (netip.Addr, bool) {
	return r.Addr(), r.Addr().Is4()
}

// setServiceRoutes replaces the routed ranges of the desired state: the
// routes themselves, their anchor addresses and their KUBE-SERVICE-CIDRS
// members, recording in t what may have changed.
func (d *desiredState) setServiceRoutes(ranges []netip.Prefix, t touched) {
	contribution := func(r netip.Prefix) (netip.Addr, bool, setEntryKey) {
		a, anchored := anchorAddress(r)
		return a, anchored, setEntryKey{set: owned.SetName(owned.SetServiceCIDRs, familyOf(r.Addr())), entry: ipset.Entry{Net: r}}
	}
	for _, r := range d.routes {
		a, anchored, e := contribution(r)
		if anchored {
			if d.addrRefs[a]--; d.addrRefs[a] <= 0 {
				delete(d.addrRefs, a)
			}
			t.addresses[a] = true
			k := setEntryKey{set: owned.SetName(owned.SetIPVSIPs, familyOf(a)), entry: ipset.Entry{IP: a}}
			if d.entryRefs[k]--; d.entryRefs[k] <= 0 {
				delete(d.entryRefs, k)
			}
			t.entries[k] = true
		}
		if d.entryRefs[e]--; d.entryRefs[e] <= 0 {
			delete(d.entryRefs, e)
		}
		t.entries[e] = true
	}
	d.routes = slices.Clone(ranges)
	for _, r := range d.routes {
		a, anchored, e := contribution(r)
		if anchored {
			d.addrRefs[a]++
			t.addresses[a] = true
			k := setEntryKey{set: owned.SetName(owned.SetIPVSIPs, familyOf(a)), entry: ipset.Entry{IP: a}}
			d.entryRefs[k]++
			t.entries[k] = true
		}
		d.entryRefs[e]++
		t.entries[e] = true
	}
}

// addServiceRoutes is the writer loop's first pass on a full sync: it adds
// the wanted routes the kernel lacks, each after its range's anchor
// address, and then tells the desired state which ranges' routes are in
// place. A range whose route is not (the kernel refused it, or another
// owner's route holds the range) gets its cluster IPs bound one by one in
// the same sync, and a range is local before its cluster IPs are unbound:
// the addresses pass comes after this one.
func (r *reconciler) addServiceRoutes(t touched) {
	if len(r.desired.routes) > 0 {
		r.ensureDummy()
	}
	for _, p := range r.desired.routes {
		if a, ok := anchorAddress(p); ok {
			r.settle(addrID(a), r.addAddress(a))
		}
	}
	// The kernel flushed the IPv4 routes if the link lost its last IPv4
	// address (a failed anchor, an admin); forget them so they are re-added.
	if !hasIPv4(r.view.addresses) {
		for p := range r.view.routes {
			if p.Addr().Is4() {
				delete(r.view.routes, p)
			}
		}
	}
	for _, p := range r.desired.routes {
		r.settle(routeID(p), r.addRoute(p))
	}
	for _, p := range r.desired.routes {
		r.desired.setRouted(p, r.view.routes[p], t)
	}
	for p := range r.desired.unrouted {
		if !slices.Contains(r.desired.routes, p) {
			r.desired.setRouted(p, true, t) // no longer wanted: nothing to bind for it
		}
	}
}

// addRoute makes range p local on kube-ipvs0 unless the view has our route.
func (r *reconciler) addRoute(p netip.Prefix) error {
	if r.view.routes[p] {
		return nil
	}
	r.writes++
	err := r.k.Netif.AddServiceRoute(p)
	switch {
	case errors.Is(err, netif.ErrExists):
		// Someone else's route to the same range: not ours to list or
		// delete, so the range's cluster IPs stay bound.
		return nil
	case err != nil:
		return err
	}
	r.view.routes[p] = true
	return nil
}

// removeServiceRoutes deletes our routes nobody wants. apply calls it last,
// so a range's cluster IPs are bound before it stops being local. Only a
// full sync changes the wanted ranges.
func (r *reconciler) removeServiceRoutes() {
	for p := range r.view.routes {
		if slices.Contains(r.desired.routes, p) {
			continue
		}
		id := routeID(p)
		if !r.full && r.retries.waits(id) {
			continue
		}
		r.settle(id, r.deleteRoute(p))
	}
}

// deleteRoute removes our route to range p.
func (r *reconciler) deleteRoute(p netip.Prefix) error {
	r.writes++
	if err := r.k.Netif.DeleteServiceRoute(p); err != nil && !errors.Is(err, netif.ErrNotFound) {
		return err
	}
	delete(r.view.routes, p)
	return nil
}

func hasIPv4(addrs map[netip.Addr]bool) bool {
	for a := range addrs {
		if a.Is4() {
			return true
		}
	}
	return false
}
