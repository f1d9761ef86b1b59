package ipvsproxy

import (
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ReasonExternalIPRefused is the Event reason for a refused external IP
// (addressguard.go).
const ReasonExternalIPRefused = "ExternalIPRefused"

// clusterIPOwner is the Service other than self holding cluster IP a.
func (n NodeInfo) clusterIPOwner(a netip.Addr, self types.NamespacedName) (types.NamespacedName, bool) {
	for _, owner := range n.ClusterIPs[a] {
		if owner != self {
			return owner, true
		}
	}
	return types.NamespacedName{}, false
}

// ClusterIPIndex is the cross-Service knowledge the address guard needs,
// kept by the proxier: which Services hold each cluster IP, and which name
// each address as an external or load balancer ingress IP. When a cluster
// IP appears or goes, the Services naming it are rebuilt, so a refusal
// follows the other Service being created or deleted later; when a fact of
// the node guard changes (a Node's addresses, the API server's), the
// Services naming or holding the address are (Users).
type ClusterIPIndex struct {
	Owners map[netip.Addr][]types.NamespacedName // sorted
	naming map[netip.Addr]map[types.NamespacedName]bool
}

// serviceAddresses are the addresses a Service names: its cluster IPs, and
// chosen, its external IPs and load balancer ingress IPs.
type serviceAddresses struct{ ClusterIPs, chosen []netip.Addr }

func NewClusterIPIndex() *ClusterIPIndex {
	return &ClusterIPIndex{
		Owners: map[netip.Addr][]types.NamespacedName{},
		naming: map[netip.Addr]map[types.NamespacedName]bool{},
	}
}

// Update records svc (nil: deleted) in place of prev, what it recorded of
// the Service last (nil: nothing; the tracker keeps it, indexService), and
// returns the other Services whose external or ingress IPs must be checked
// again because a cluster IP came or went.
func (x *ClusterIPIndex) Update(name types.NamespacedName, prev, svc *Service) []types.NamespacedName {
	var old, now serviceAddresses
	if prev != nil {
		old = AddressesOf(prev)
	}
	if svc != nil {
		now = AddressesOf(svc)
	}
	var dependents []types.NamespacedName
	for _, a := range old.ClusterIPs {
		if !slices.Contains(now.ClusterIPs, a) {
			x.Owners[a] = slices.DeleteFunc(x.Owners[a], func(n types.NamespacedName) bool { return n == name })
			if len(x.Owners[a]) == 0 {
				delete(x.Owners, a)
			}
			dependents = x.AppendNaming(dependents, a, name)
		}
	}
	for _, a := range now.ClusterIPs {
		if !slices.Contains(old.ClusterIPs, a) {
			x.Owners[a] = append(x.Owners[a], name)
			slices.SortFunc(x.Owners[a], func(p, q types.NamespacedName) int { return strings.Compare(p.String(), q.String()) })
			dependents = x.AppendNaming(dependents, a, name)
		}
	}
	for _, a := range old.chosen {
		if m := x.naming[a]; m != nil {
			delete(m, name)
			if len(m) == 0 {
				delete(x.naming, a)
			}
		}
	}
	for _, a := range now.chosen {
		if x.naming[a] == nil {
			x.naming[a] = map[types.NamespacedName]bool{}
		}
		x.naming[a][name] = true
	}
	return dependents
}

// AppendNaming adds to out the Services but except that name a as an
// external or ingress IP.
func (x *ClusterIPIndex) AppendNaming(out []types.NamespacedName, a netip.Addr, except types.NamespacedName) []types.NamespacedName {
	for n := range x.naming[a] {
		if n != except && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// AppendUsers adds to out the Services that hold a as a cluster IP or name
// it as an external or ingress IP.
func (x *ClusterIPIndex) AppendUsers(out []types.NamespacedName, a netip.Addr) []types.NamespacedName {
	for _, n := range x.Owners[a] {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return x.AppendNaming(out, a, types.NamespacedName{})
}

// AddressesOf is a Service's cluster IPs, external IPs and load balancer
// ingress IPs that parse (unmapped, without repeats; ingress IPs of any
// type and mode: the index only says whom to rebuild); what does not
// parse is the builder's to report. The compact Service holds most
// already parsed.
func AddressesOf(svc *Service) serviceAddresses {
	var out serviceAddresses
	if svc.Type() != v1.ServiceTypeExternalName {
		out.ClusterIPs = svc.clusterIPList().parsed()
	}
	if svc.rare != nil {
		out.chosen = svc.rare.externalIPs.parsed()
		for _, ing := range svc.rare.ingress {
			if a, err := netip.ParseAddr(ing.IP); err == nil && !slices.Contains(out.chosen, a.Unmap()) {
				out.chosen = append(out.chosen, a.Unmap())
			}
		}
	}
	return out
}
