package proxier

import (
	"errors"
	"maps"
	"net/netip"
	"slices"

	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
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
	for _, r := range ipvsproxy.SortedPrefixes(append(slices.Clone(p.cfg.ServiceCIDRs), p.tracker.ServiceCIDRRanges()...)) {
		r = r.Masked()
		if !p.cfg.HasFamily(ipvsproxy.FamilyOf(r.Addr())) {
			continue
		}
		if why := ipvsproxy.Unroutable(r, p.cfg, host); why != "" {
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

// addServiceRoutes is the writer loop's first pass on a full sync: it adds
// the wanted routes the kernel lacks, each after its range's anchor
// address, and then tells the desired state which ranges' routes are in
// place. A range whose route is not (the kernel refused it, or another
// owner's route holds the range) gets its cluster IPs bound one by one in
// the same sync, and a range is local before its cluster IPs are unbound:
// the addresses pass comes after this one.
func (r *reconciler) addServiceRoutes(t ipvsproxy.Touched) {
	if len(r.desired.Routes) > 0 {
		r.ensureDummy()
	}
	for _, p := range r.desired.Routes {
		if a, ok := ipvsproxy.AnchorAddress(p); ok {
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
	for _, p := range r.desired.Routes {
		r.settle(routeID(p), r.addRoute(p))
	}
	for _, p := range r.desired.Routes {
		r.desired.SetRouted(p, r.view.routes[p], t)
	}
	for p := range r.desired.UnroutedRanges() {
		if !slices.Contains(r.desired.Routes, p) {
			r.desired.SetRouted(p, true, t) // no longer wanted: nothing to bind for it
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
		if slices.Contains(r.desired.Routes, p) {
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
