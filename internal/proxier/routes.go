package proxier

import (
	"errors"
	"iter"
	"net/netip"
	"slices"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
)

// Service CIDRs are made local with one `local` route each on kube-ipvs0
// instead of one bound address per cluster IP: every RTM_NEWADDR walks the
// link's address list, so binding N cluster IPs costs O(N²) in the kernel
// (3.3 s for 10,000 here, 37 s for 20,000). A cluster IP inside a
// routed range is then not bound; external and load balancer IPs still are.
// KUBE-SERVICE-CIDRS holds the ranges so that KUBE-IPVS-FILTER rejects new
// connections to their unused addresses, as it does for bound ones. Which
// ranges are routed the model decides (ipvsproxy/model.go).

// routeOps add and delete our Service CIDR routes on kube-ipvs0. The
// wanted routes are added on a full sync only (only a full sync changes
// them), after their anchors (addAnchors); the ones nobody wants are
// deleted last, so a range's cluster IPs are bound before it stops being
// local.
func (r *reconciler) routeOps() operations[netip.Prefix] {
	return operations[netip.Prefix]{
		id:     routeID,
		wanted: func(p netip.Prefix) bool { return slices.Contains(r.desired.Routes, p) },
		update: r.addRoute,
		delete: r.deleteRoute,
	}
}

// addAnchors binds each wanted range's anchor address before its route:
// the kernel flushes a link's IPv4 routes when it loses its last IPv4
// address.
func (r *reconciler) addAnchors() {
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
}

// noteRoutes reports, after the routes pass, whether each wanted range's
// route is in place. For a range whose route is not (the kernel refused
// it, or another owner's route holds the range) the model binds its
// cluster IPs one by one, which the same sync writes.
func (r *reconciler) noteRoutes() {
	r.found.Routes = make(map[netip.Prefix]bool, len(r.desired.Routes))
	for _, p := range r.desired.Routes {
		r.found.Routes[p] = r.view.routes[p]
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

// routesDue are our routes in the kernel that the routes pass looks at:
// all of them on a full sync, else those not backing off.
func (r *reconciler) routesDue() iter.Seq[netip.Prefix] {
	return func(yield func(netip.Prefix) bool) {
		for p := range r.view.routes {
			if (r.full || !r.retries.waits(routeID(p))) && !yield(p) {
				return
			}
		}
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
