package ipvsproxy

import (
	"maps"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// serviceSummary is what a sync reports about the whole desired state
// (health-check node ports, Local Services without a local endpoint). It is
// kept up to date one Service at a time by desiredState.set, so that a
// partial sync does not walk every Service to report it.
type serviceSummary struct {
	healthCheckNodePorts map[types.NamespacedName]uint16
	localReadyEndpoints  map[types.NamespacedName]int
	// noLocalEndpoints counts Services by family and policy ("internal",
	// "external") with a Local-policy virtual server and no real server: a
	// dual-stack Service counts once under each family it lacks one in, as
	// kube-proxy's per-family proxiers count it.
	noLocalEndpoints map[NoLocalKey]int
}

// NoLocalKey is one family's count of Services under one traffic policy
// ("internal" or "external") that have no local endpoint.
type NoLocalKey struct {
	Family v1.IPFamily
	Policy string
}

func newServiceSummary() serviceSummary {
	return serviceSummary{healthCheckNodePorts: map[types.NamespacedName]uint16{}, localReadyEndpoints: map[types.NamespacedName]int{}, noLocalEndpoints: map[NoLocalKey]int{}}
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
	for _, key := range noLocalPolicies(st) {
		s.noLocalEndpoints[key] += sign
	}
}

// noLocalPolicies lists, once each, the families and policies ("internal"
// for cluster IPs, "external" otherwise) under which st has a Local virtual
// server with no local real server (none, or only other nodes' for
// in-cluster sources).
func noLocalPolicies(st *ServiceState) []NoLocalKey {
	var out []NoLocalKey
	for _, vs := range st.VirtualServers {
		if vs.LocalOnly && (len(vs.RealServers) == 0 || vs.InClusterOnly) {
			key := NoLocalKey{Family: FamilyOf(vs.Address), Policy: "external"}
			if vs.Kind == KindClusterIP {
				key.Policy = "internal"
			}
			if !slices.Contains(out, key) {
				out = append(out, key)
			}
		}
	}
	return out
}

// Report copies the summary out for a SyncResult.
func (s serviceSummary) Report() (healthCheckNodePorts map[types.NamespacedName]uint16, localReadyEndpoints map[types.NamespacedName]int, noLocalEndpoints map[NoLocalKey]int) {
	noLocalEndpoints = map[NoLocalKey]int{}
	for key, n := range s.noLocalEndpoints {
		if n > 0 {
			noLocalEndpoints[key] = n
		}
	}
	return maps.Clone(s.healthCheckNodePorts), maps.Clone(s.localReadyEndpoints), noLocalEndpoints
}

// BuiltNode is what every ServiceState was last built against. A full sync
// rebuilds every Service only when it changed (or nothing was built yet):
// otherwise the desired state is still right and the kernel is only read
// back and compared (a periodic resync, the retry after a failure).
type BuiltNode struct {
	valid     bool
	zone      string
	addresses []netip.Addr
	podCIDRs  []netip.Prefix
	ranges    []netip.Prefix // ServiceCIDRs
	routes    []netip.Prefix
}

func (b BuiltNode) Same(n NodeInfo) bool {
	return b.valid && b.zone == n.Zone && slices.Equal(b.addresses, n.Addresses) && slices.Equal(b.podCIDRs, n.PodCIDRs) &&
		slices.Equal(b.ranges, n.ServiceCIDRs) && slices.Equal(b.routes, n.RoutedServiceCIDRs)
}

func BuiltFrom(n NodeInfo) BuiltNode {
	return BuiltNode{valid: true, zone: n.Zone, addresses: slices.Clone(n.Addresses), podCIDRs: slices.Clone(n.PodCIDRs),
		ranges: slices.Clone(n.ServiceCIDRs), routes: slices.Clone(n.RoutedServiceCIDRs)}
}
