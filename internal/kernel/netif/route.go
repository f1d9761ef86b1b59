package netif

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// RouteProtocol marks the routes this package adds (rtm_protocol; `ip route`
// prints it as "proto 233"). It is how ServiceRoutes and DeleteServiceRoute
// tell ours from routes an admin or another agent put on the same link. The
// number is not in iproute2's rt_protos list of registered ones.
const RouteProtocol = 233

// serviceRoute is the route that makes every address of p local: type
// local, scope host, in table local, on the dummy link. Packets to any of
// them are then delivered to this host (and so reach IPVS in LOCAL_IN) as
// if each address were bound, at the cost of one route instead of one
// address per cluster IP (each RTM_NEWADDR walks the link's address list).
func serviceRoute(link netlink.Link, p netip.Prefix) *netlink.Route {
	return &netlink.Route{
		LinkIndex: link.Attrs().Index,
		Dst:       &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())},
		Table:     unix.RT_TABLE_LOCAL,
		Type:      unix.RTN_LOCAL,
		Scope:     netlink.SCOPE_HOST,
		Protocol:  RouteProtocol,
	}
}

func (k *kernel) ServiceRoutes() ([]netip.Prefix, error) {
	link, err := k.dummyLink()
	if err != nil {
		return nil, fmt.Errorf("list service routes on %s: %w", k.dummy, err)
	}
	routes, err := k.ownRoutes(link)
	if err != nil {
		return nil, fmt.Errorf("list service routes on %s: %w", k.dummy, err)
	}
	return routes, nil
}

// ownRoutes dumps table local and keeps the local routes on link that carry
// RouteProtocol. The dump's filter (table, link, protocol, type) is applied
// by the kernel (k.dumps checks strictly) and again here. One dump per
// family rather than one of all: a strict dump of every family would reach
// MPLS's, which refuses a table in the request. A dump the kernel marks
// interrupted is retried.
func (k *kernel) ownRoutes(link netlink.Link) ([]netip.Prefix, error) {
	filter := &netlink.Route{Table: unix.RT_TABLE_LOCAL, LinkIndex: link.Attrs().Index, Protocol: RouteProtocol, Type: unix.RTN_LOCAL}
	mask := uint64(netlink.RT_FILTER_TABLE | netlink.RT_FILTER_OIF | netlink.RT_FILTER_PROTOCOL | netlink.RT_FILTER_TYPE)
	out := []netip.Prefix{}
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		var (
			routes []netlink.Route
			err    error
		)
		for range 5 {
			routes, err = k.dumps.RouteListFiltered(family, filter, mask)
			if !errors.Is(err, netlink.ErrDumpInterrupted) {
				break
			}
		}
		switch {
		case family == netlink.FAMILY_V6 && errors.Is(err, unix.EAFNOSUPPORT):
			continue // IPv6 disabled at boot: no IPv6 routes
		case errors.Is(err, unix.ENOENT):
			// A strict dump of a table the family has not created yet
			// (IPv4's local table before its first address).
			continue
		case err != nil:
			return nil, err
		}
		for _, r := range routes {
			if r.Dst == nil {
				continue
			}
			a, ok := netip.AddrFromSlice(r.Dst.IP)
			if !ok {
				continue
			}
			bits, _ := r.Dst.Mask.Size()
			out = append(out, netip.PrefixFrom(a.Unmap(), bits))
		}
	}
	return sortedPrefixes(out), nil
}

func (k *kernel) AddServiceRoute(p netip.Prefix) error {
	p, err := canonicalPrefix(p)
	if err != nil {
		return fmt.Errorf("add service route on %s: %w", k.dummy, err)
	}
	link, err := k.dummyLink()
	if err != nil {
		return fmt.Errorf("add service route %s on %s: %w", p, k.dummy, err)
	}
	// RouteAdd sends NLM_F_CREATE|NLM_F_EXCL: a route to p of any protocol
	// already in table local answers EEXIST and is left alone.
	if err := k.handle.RouteAdd(serviceRoute(link, p)); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("add service route %s on %s: %w (%w)", p, k.dummy, ErrExists, err)
		}
		return fmt.Errorf("add service route %s on %s: %w", p, k.dummy, err)
	}
	return nil
}

func (k *kernel) DeleteServiceRoute(p netip.Prefix) error {
	p, err := canonicalPrefix(p)
	if err != nil {
		return fmt.Errorf("delete service route on %s: %w", k.dummy, err)
	}
	link, err := k.dummyLink()
	if err != nil {
		return fmt.Errorf("delete service route %s on %s: %w", p, k.dummy, err)
	}
	// The kernel deletes only a route whose protocol, type, table and
	// device match (fib_table_delete), so a route of someone else to the
	// same prefix answers ESRCH and stays.
	if err := k.handle.RouteDel(serviceRoute(link, p)); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("delete service route %s on %s: %w (%w)", p, k.dummy, ErrNotFound, err)
		}
		return fmt.Errorf("delete service route %s on %s: %w", p, k.dummy, err)
	}
	return nil
}

func sortedPrefixes(ps []netip.Prefix) []netip.Prefix {
	out := slices.Clone(ps)
	if out == nil {
		out = []netip.Prefix{}
	}
	slices.SortFunc(out, comparePrefix)
	return slices.Compact(out)
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
