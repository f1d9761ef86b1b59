package ipvsproxy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The CVE-2020-8554 guard, which kube-proxy lacks: any
// Service author can name any address as an external IP, and the node then
// answers for it, so traffic meant for someone else's address is
// intercepted. An external IP is refused, with an Event on its Service,
// when it is another Service's cluster IP, lies in the pod ranges (the
// cluster CIDRs or this Node's spec.podCIDRs) or the Service ranges, or lies
// outside --external-ip-cidrs when that is set (empty allows all, as before).
// Upstream (kubernetes#97076) leaves this to admission (a webhook, or the
// DenyServiceExternalIPs plugin), which the node cannot rely on.

// ReasonExternalIPRefused is the Event reason for a refused external IP.
const ReasonExternalIPRefused = "ExternalIPRefused"

// externalIPs are the Service's usable external IPs of family that the
// guard allows; each refused one is reported (it has one family, so once).
func (b *builder) externalIPs(family v1.IPFamily) []netip.Addr {
	var out []netip.Addr
	for _, a := range b.addresses(family, b.svc.Spec.ExternalIPs, "external IP") {
		if why := b.externalIPRefusal(a); why != "" {
			b.problem(ReasonExternalIPRefused, "%s; not served (CVE-2020-8554)", why)
			continue
		}
		out = append(out, a)
	}
	return out
}

// externalIPRefusal says why an external IP may not be served, or "".
func (b *builder) externalIPRefusal(a netip.Addr) string {
	if owner, ok := b.node.clusterIPOwner(a, b.st.Name); ok {
		return fmt.Sprintf("external IP %s is the cluster IP of Service %s", a, owner)
	}
	if why := b.node.clusterAddressRefusal(a); why != "" {
		return why
	}
	if p, ok := containing(slices.Concat(b.cfg.ServiceCIDRs, b.node.ServiceCIDRs), a); ok {
		return fmt.Sprintf("external IP %s lies in the Service range %s", a, p)
	}
	if p, ok := containing(b.cfg.ClusterCIDRs, a); ok {
		return fmt.Sprintf("external IP %s lies in the pod range %s (--cluster-cidr)", a, p)
	}
	if p, ok := containing(b.node.PodCIDRs, a); ok {
		return fmt.Sprintf("external IP %s lies in the pod range %s of Node %s", a, p, b.node.Name)
	}
	if len(b.cfg.ExternalIPCIDRs) > 0 {
		if _, ok := containing(b.cfg.ExternalIPCIDRs, a); !ok {
			return fmt.Sprintf("external IP %s is outside --external-ip-cidrs", a)
		}
	}
	return ""
}

func containing(ranges []netip.Prefix, a netip.Addr) (netip.Prefix, bool) {
	for _, p := range ranges {
		if p.Contains(a) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// clusterIPOwner is the Service other than self holding cluster IP a.
func (n NodeInfo) clusterIPOwner(a netip.Addr, self types.NamespacedName) (types.NamespacedName, bool) {
	for _, owner := range n.ClusterIPs[a] {
		if owner != self {
			return owner, true
		}
	}
	return types.NamespacedName{}, false
}

// ClusterIPIndex is the cross-Service knowledge the guard needs, kept by the
// proxier: which Services hold each cluster IP, and which name each address
// as an external IP. When a cluster IP appears or goes, the Services naming
// it as an external IP are rebuilt, so a refusal follows the other Service
// being created or deleted later.
type ClusterIPIndex struct {
	Owners map[netip.Addr][]types.NamespacedName // sorted
	naming map[netip.Addr]map[types.NamespacedName]bool
	// service is each Service as last recorded, to diff its addresses
	// against the next: the compact Service the tracker holds anyway (a
	// pointer, where a copy of its parsed addresses cost about 2 MB at
	// 10,000 Services).
	service map[types.NamespacedName]*Service
}

type serviceAddresses struct{ ClusterIPs, externalIPs []netip.Addr }

func NewClusterIPIndex() *ClusterIPIndex {
	return &ClusterIPIndex{
		Owners:  map[netip.Addr][]types.NamespacedName{},
		naming:  map[netip.Addr]map[types.NamespacedName]bool{},
		service: map[types.NamespacedName]*Service{},
	}
}

// Update records svc (nil: deleted) and returns the other Services whose
// external IPs must be checked again because a cluster IP came or went.
func (x *ClusterIPIndex) Update(name types.NamespacedName, svc *Service) []types.NamespacedName {
	var old, now serviceAddresses
	if prev := x.service[name]; prev != nil {
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
	for _, a := range old.externalIPs {
		if m := x.naming[a]; m != nil {
			delete(m, name)
			if len(m) == 0 {
				delete(x.naming, a)
			}
		}
	}
	for _, a := range now.externalIPs {
		if x.naming[a] == nil {
			x.naming[a] = map[types.NamespacedName]bool{}
		}
		x.naming[a][name] = true
	}
	if svc == nil {
		delete(x.service, name)
	} else {
		x.service[name] = svc
	}
	return dependents
}

func (x *ClusterIPIndex) AppendNaming(out []types.NamespacedName, a netip.Addr, except types.NamespacedName) []types.NamespacedName {
	for n := range x.naming[a] {
		if n != except && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// AddressesOf is a Service's cluster IPs and external IPs that parse
// (unmapped, without repeats); what does not parse is the builder's to
// report. The compact Service holds most already parsed.
func AddressesOf(svc *Service) serviceAddresses {
	var out serviceAddresses
	if svc.Type != v1.ServiceTypeExternalName {
		out.ClusterIPs = svc.clusterIPList().parsed()
	}
	if svc.rare != nil {
		out.externalIPs = svc.rare.externalIPs.parsed()
	}
	return out
}
