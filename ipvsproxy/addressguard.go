package ipvsproxy

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/listeners"
	v1 "k8s.io/api/core/v1"
)

// The address guard: every address a Service names that the proxier would
// bind on kube-ipvs0 or serve with a virtual server passes through it,
// whichever field it comes from (spec.clusterIPs, spec.externalIPs,
// status.loadBalancer.ingress[].ip). A bound address is local to the node,
// so one that belongs to someone the node must keep reaching cuts it off:
// another Node (k3s's ServiceLB publishes node addresses as ingress IPs by
// design; bound on every other node, they stopped reaching that node), the
// API server (every node lost the API, and so the watch that would undo
// it), or an address the operator protects. kube-proxy has the same holes.
// A refused address is never bound and gets no virtual server, with an
// Event naming the Service, the field and the address; the Service's other
// addresses are served. An address of this node itself is served without
// binding (the node holds it anyway), except on a port a process of the
// node listens on (sshd, the kubelet, the API server on a control-plane
// node), which it would take over.

// addressField is a field of a Service that names addresses to serve.
type addressField int

const (
	fieldClusterIP addressField = iota
	fieldExternalIP
	fieldLoadBalancerIP
)

// String is the field as a refusal names it.
func (f addressField) String() string {
	switch f {
	case fieldClusterIP:
		return "cluster IP"
	case fieldExternalIP:
		return "external IP"
	}
	return "load balancer ingress IP"
}

// reason is the Event reason of a refusal in the field.
func (f addressField) reason() string {
	switch f {
	case fieldClusterIP:
		return ReasonClusterIPRefused
	case fieldExternalIP:
		return ReasonExternalIPRefused
	}
	return ReasonLoadBalancerIPRefused
}

// Event reasons of the guard; ReasonExternalIPRefused is in externalips.go.
const (
	ReasonClusterIPRefused      = "ClusterIPRefused"
	ReasonLoadBalancerIPRefused = "LoadBalancerIPRefused"
)

// APIServerAddress is an address of the API server the daemon found for
// itself, and how (Source ends "an address of the API server (...)").
type APIServerAddress struct {
	Addr   netip.Addr
	Source string
}

// guarded keeps the addresses of family named in field f that the guard
// allows; each refused one is reported once (an address has one family).
func (b *builder) guarded(f addressField, addrs []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		if why := b.addressRefusal(f, a); why != "" {
			b.problem(f.reason(), "%s", why)
			continue
		}
		out = append(out, a)
	}
	return out
}

// addressRefusal says why address a, named in field f, may not be served
// on this node at all (the Event's message), or "".
func (b *builder) addressRefusal(f addressField, a netip.Addr) string {
	if why := b.clusterAddressRefusal(a); why != "" {
		return fmt.Sprintf("%s %s %s; not served", f, a, why)
	}
	if f == fieldClusterIP {
		// The API server allocated it from a Service range: the rest of
		// the guard is about addresses a Service author chooses.
		return ""
	}
	if why := b.chosenAddressRefusal(f, a); why != "" {
		return fmt.Sprintf("%s %s %s; not served (CVE-2020-8554)", f, a, why)
	}
	return ""
}

// clusterAddressRefusal says why a is an address the nodes must keep
// reaching, or "": an address the operator protects, another Node's, the
// API server's. Only the operator's list holds for an address of this
// node too: a node serving its own address cuts nobody off, and the ports
// its processes use are kept by portRefusal.
func (b *builder) clusterAddressRefusal(a netip.Addr) string {
	if p, ok := containing(b.cfg.ProtectAddresses, a); ok {
		return fmt.Sprintf("lies in --protect-addresses %s", p)
	}
	if b.node.isOwn(a) {
		return ""
	}
	if node, ok := b.node.OtherNodes[a]; ok {
		return fmt.Sprintf("is an address of Node %s, which alone may serve it", node)
	}
	if slices.Contains(b.node.APIServers, a) {
		return fmt.Sprintf("is an address of the API server (an endpoint of Service %s)", KubernetesService)
	}
	for _, s := range b.cfg.APIServers {
		if s.Addr == a && !b.servedByProxier(a) {
			return fmt.Sprintf("is an address of the API server (%s)", s.Source)
		}
	}
	return ""
}

// servedByProxier says whether a lies in a Service range or is
// default/kubernetes's cluster IP (the ranges may be unknown: no
// --service-cidrs, no ServiceCIDR API): an in-cluster daemon dials that
// cluster IP, which the proxier itself serves, so protecting it would cut
// the API.
func (b *builder) servedByProxier(a netip.Addr) bool {
	if slices.Contains(b.node.ClusterIPs[a], KubernetesService) {
		return true
	}
	_, ok := containing(slices.Concat(b.cfg.ServiceCIDRs, b.node.ServiceCIDRs), a)
	return ok
}

// chosenAddressRefusal says why an address a Service author (or a load
// balancer controller) chose may not be served, or "": it would take
// someone else's traffic (CVE-2020-8554, which kube-proxy lacks a guard
// for): another Service's cluster IP, the Service or pod ranges, or, for an
// external IP, outside --external-ip-cidrs when that is set (empty allows
// all). Upstream (kubernetes#97076) leaves this to admission (a webhook, or
// the DenyServiceExternalIPs plugin), which the node cannot rely on.
func (b *builder) chosenAddressRefusal(f addressField, a netip.Addr) string {
	if owner, ok := b.node.clusterIPOwner(a, b.st.Name); ok {
		return fmt.Sprintf("is the cluster IP of Service %s", owner)
	}
	if p, ok := containing(slices.Concat(b.cfg.ServiceCIDRs, b.node.ServiceCIDRs), a); ok {
		return fmt.Sprintf("lies in the Service range %s", p)
	}
	if p, ok := containing(b.cfg.ClusterCIDRs, a); ok {
		return fmt.Sprintf("lies in the pod range %s (--cluster-cidr)", p)
	}
	if p, ok := containing(b.node.PodCIDRs, a); ok {
		return fmt.Sprintf("lies in the pod range %s of Node %s", p, b.node.Name)
	}
	if f == fieldExternalIP && len(b.cfg.ExternalIPCIDRs) > 0 {
		if _, ok := containing(b.cfg.ExternalIPCIDRs, a); !ok {
			return "is outside --external-ip-cidrs"
		}
	}
	return ""
}

// portAllowed says whether address a of field f may take protocol/port on
// this node; a refusal is reported as this node's.
func (b *builder) portAllowed(f addressField, a netip.Addr, protocol v1.Protocol, port uint16) bool {
	why := b.portRefusal(a, protocol, port)
	if why == "" {
		return true
	}
	b.st.Problems = append(b.st.Problems, Problem{Object: b.ref, Reason: f.reason(), Scope: ScopeNode,
		Message: fmt.Sprintf("%s %s %s; not served", f, a, why)})
	return false
}

// portRefusal says why address a may not take port on this node, or "":
// the address is one of the node's own, and a process listens on that port
// of it (or of every address).
func (b *builder) portRefusal(a netip.Addr, protocol v1.Protocol, port uint16) string {
	if !b.node.isOwn(a) {
		return ""
	}
	to := netip.AddrPortFrom(a, port)
	for _, l := range b.node.Listening {
		if l.Covers(listeners.Protocol(protocol), to) {
			return fmt.Sprintf("is an address of this node, and a process of the node listens on %s", l)
		}
	}
	return ""
}

// isOwn says whether a is one of this node's addresses.
func (n NodeInfo) isOwn(a netip.Addr) bool {
	return slices.ContainsFunc(n.Addresses, func(x netip.Addr) bool { return x.Unmap() == a })
}

func containing(ranges []netip.Prefix, a netip.Addr) (netip.Prefix, bool) {
	for _, p := range ranges {
		if p.Contains(a) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}
