package ipvsproxy

import (
	"maps"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/types"
)

// serviceSummary is what a sync reports about the whole desired state
// (health-check node ports, Local Services without a local endpoint). It is
// kept up to date one Service at a time by desiredState.set, so that a
// partial sync does not walk every Service to report it (issue 9).
type serviceSummary struct {
	healthCheckNodePorts map[types.NamespacedName]uint16
	localReadyEndpoints  map[types.NamespacedName]int
	// noLocalEndpoints counts Services by policy ("internal", "external")
	// with a Local-policy virtual server and no real server.
	noLocalEndpoints map[string]int
}

func newServiceSummary() serviceSummary {
	return serviceSummary{healthCheckNodePorts: map[types.NamespacedName]uint16{}, localReadyEndpoints: map[types.NamespacedName]int{}, noLocalEndpoints: map[string]int{}}
}

// add (sign 1) or remove (sign -1) one Service's share.
func (s serviceSummary) update(st *ServiceState, sign int) {
	if st.HealthCheckNodePort != 0 {
		if sign > 0 {
			s.healthCheckNodePorts[st.Name] = st.HealthCheckNodePort
			s.localReadyEndpoints[st.Name] = st.LocalReadyEndpoints
		} else {
			delete(s.healthCheckNodePorts, st.Name)
			delete(s.localReadyEndpoints, st.Name)
		}
	}
	for _, policy := range noLocalPolicies(st) {
		s.noLocalEndpoints[policy] += sign
	}
}

// noLocalPolicies lists, once each, the policies ("internal" for cluster
// IPs, "external" otherwise) under which st has a Local virtual server with
// no local real server (none, or only other nodes' for in-cluster sources).
func noLocalPolicies(st *ServiceState) []string {
	var out []string
	for _, vs := range st.VirtualServers {
		if vs.LocalOnly && (len(vs.RealServers) == 0 || vs.InClusterOnly) {
			policy := "external"
			if vs.Kind == KindClusterIP {
				policy = "internal"
			}
			if !slices.Contains(out, policy) {
				out = append(out, policy)
			}
		}
	}
	return out
}

// report copies the summary into a SyncResult.
func (s serviceSummary) report(res *SyncResult) {
	res.HealthCheckNodePorts = maps.Clone(s.healthCheckNodePorts)
	res.LocalReadyEndpoints = maps.Clone(s.localReadyEndpoints)
	res.NoLocalEndpoints = map[string]int{}
	for policy, n := range s.noLocalEndpoints {
		if n > 0 {
			res.NoLocalEndpoints[policy] = n
		}
	}
}

// builtNode is what every ServiceState was last built against. A full sync
// rebuilds every Service only when it changed (or nothing was built yet):
// otherwise the desired state is still right and the kernel is only read
// back and compared (a periodic resync, the retry after a failure).
type builtNode struct {
	valid     bool
	zone      string
	addresses []netip.Addr
	podCIDRs  []netip.Prefix
	ranges    []netip.Prefix // ServiceCIDRs
	routes    []netip.Prefix
}

func (b builtNode) same(n NodeInfo) bool {
	return b.valid && b.zone == n.Zone && slices.Equal(b.addresses, n.Addresses) && slices.Equal(b.podCIDRs, n.PodCIDRs) &&
		slices.Equal(b.ranges, n.ServiceCIDRs) && slices.Equal(b.routes, n.RoutedServiceCIDRs)
}

func builtFrom(n NodeInfo) builtNode {
	return builtNode{valid: true, zone: n.Zone, addresses: slices.Clone(n.Addresses), podCIDRs: slices.Clone(n.PodCIDRs),
		ranges: slices.Clone(n.ServiceCIDRs), routes: slices.Clone(n.RoutedServiceCIDRs)}
}
