package ipvsproxy

import (
	"slices"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
)

// StaleUDPFlows returns conntrack filters for the UDP flows a Service change
// leaves stale. UDP has no connection end, so without this a client that
// keeps one source port keeps talking to a dead endpoint (kubernetes#59368):
//   - an endpoint that no longer backs a port: its flows, matched by the
//     reply source, on every address of that port (cluster IP, node ports,
//     external and load balancer IPs);
//   - a port that had no endpoints and now has some: flows to its addresses
//     created while there was nothing to answer them.
//
// Nothing else is matched. old or new may be nil (Service added or deleted).
func StaleUDPFlows(old, new *ServiceState) []conntrack.Filter {
	type portState struct {
		addresses []ipvs.VirtualServerKey
		endpoints map[ipvs.RealServerKey]bool
	}
	collect := func(st *ServiceState) map[ServicePortName]*portState {
		out := map[ServicePortName]*portState{}
		if st == nil {
			return out
		}
		for _, vs := range st.VirtualServers {
			if vs.Protocol != ipvs.UDP {
				continue
			}
			ps := out[vs.Port]
			if ps == nil {
				ps = &portState{endpoints: map[ipvs.RealServerKey]bool{}}
				out[vs.Port] = ps
			}
			ps.addresses = append(ps.addresses, vs.VirtualServerKey)
			for _, rs := range vs.RealServers.All() {
				ps.endpoints[rs.RealServerKey] = true
			}
		}
		return out
	}
	before, after := collect(old), collect(new)
	var filters []conntrack.Filter
	for port, was := range before {
		now := after[port]
		addresses := was.addresses
		if now != nil {
			addresses = unionKeys(addresses, now.addresses)
		}
		for ep := range was.endpoints {
			if now != nil && now.endpoints[ep] {
				continue
			}
			for _, a := range addresses {
				filters = append(filters, conntrack.Filter{Protocol: conntrack.UDP, OrigDst: a.Address, OrigDstPort: a.Port, ReplySrc: ep.Address, ReplySrcPort: ep.Port})
			}
		}
	}
	for port, now := range after {
		if len(now.endpoints) == 0 {
			continue
		}
		if was := before[port]; was != nil && len(was.endpoints) > 0 {
			continue
		}
		for _, a := range now.addresses {
			filters = append(filters, conntrack.Filter{Protocol: conntrack.UDP, OrigDst: a.Address, OrigDstPort: a.Port})
		}
	}
	slices.SortFunc(filters, CompareFilters)
	return slices.Compact(filters)
}

func unionKeys(a, b []ipvs.VirtualServerKey) []ipvs.VirtualServerKey {
	out := append([]ipvs.VirtualServerKey{}, a...)
	for _, k := range b {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

func CompareFilters(a, b conntrack.Filter) int {
	if c := a.OrigDst.Compare(b.OrigDst); c != 0 {
		return c
	}
	if a.OrigDstPort != b.OrigDstPort {
		return int(a.OrigDstPort) - int(b.OrigDstPort)
	}
	if c := a.ReplySrc.Compare(b.ReplySrc); c != 0 {
		return c
	}
	return int(a.ReplySrcPort) - int(b.ReplySrcPort)
}
