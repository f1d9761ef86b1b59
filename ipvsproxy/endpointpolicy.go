package ipvsproxy

import (
	"fmt"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/types"
)

// Which endpoint addresses may be real servers. A real server is reached
// from this node with the node's own address (a node port or load balancer
// IP with policy Cluster is masqueraded), so an EndpointSlice naming
// someone else's address turns the Service into a door to it for whoever
// reaches the Service: the confused deputy of CVE-2021-25740. kube-proxy
// takes any address the API accepted; the API's validation
// (ValidateEndpointIP) refuses unspecified, loopback, link-local (the cloud
// metadata address 169.254.169.254 among them) and link-local multicast
// addresses. The default here is the same refusal, made again on every
// node, since objects stored before that validation or written around it
// still reach the proxier, and what the kernel refuses as a destination
// (multicast, 0.0.0.0/8, the limited broadcast address), which would fail
// the write of the whole Service.
// Stricter, for an operator who lets tenants write EndpointSlices:
// --refuse-endpoint-cidrs names ranges no endpoint may lie in (other
// metadata services, the control plane's network), and
// --refuse-node-endpoints refuses the addresses the nodes run on: every
// Node's, the API server's, --protect-addresses (only a kube-system Service
// and default/kubernetes may name them: hostNetwork pods elsewhere then lose
// their Services). A refused address is no real server of any port, with
// an EndpointRefused Event on its slice; the Service's other endpoints
// serve.

// ReasonEndpointRefused is the Event reason for an endpoint address that may
// not be a real server.
const ReasonEndpointRefused = "EndpointRefused"

// endpointPolicy decides which endpoint addresses of one Service's slices
// may be real servers. The zero value applies the default refusals only.
type endpointPolicy struct {
	Service types.NamespacedName
	cfg     *Config
	node    *NodeInfo
}

// NewEndpointPolicy is the policy of cfg for the slices of service on node.
func NewEndpointPolicy(service types.NamespacedName, cfg *Config, node *NodeInfo) endpointPolicy {
	return endpointPolicy{Service: service, cfg: cfg, node: node}
}

// refusal says why endpoint address a may not be a real server, or "".
func (p endpointPolicy) refusal(a netip.Addr) string {
	switch {
	case a.IsUnspecified():
		return "is the unspecified address"
	case a.IsLoopback():
		return "is a loopback address"
	case a.IsLinkLocalUnicast():
		return "is link-local (cloud metadata services answer on 169.254.169.254, CVE-2021-25740)"
	case a.IsMulticast():
		return "is a multicast address"
	case a.Is4() && a.As4()[0] == 0:
		// The kernel refuses it as a destination (ip_vs_new_dest).
		return "is in 0.0.0.0/8, which no host may use"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "is the limited broadcast address"
	}
	if p.cfg == nil {
		return ""
	}
	if r, ok := containing(p.cfg.RefuseEndpointCIDRs, a); ok {
		return fmt.Sprintf("lies in --refuse-endpoint-cidrs %s", r)
	}
	if !p.cfg.RefuseNodeEndpoints || p.node == nil || p.Service.Namespace == "kube-system" || p.Service == KubernetesService {
		return ""
	}
	const why = " (--refuse-node-endpoints: only kube-system's Services and %s may name it)"
	switch {
	case p.node.isOwn(a):
		return fmt.Sprintf("is an address of this node, Node %s"+why, p.node.Name, KubernetesService)
	case p.node.OtherNodes[a] != "":
		return fmt.Sprintf("is an address of Node %s"+why, p.node.OtherNodes[a], KubernetesService)
	case slices.Contains(p.node.APIServers, a) || slices.ContainsFunc(p.cfg.APIServers, func(s APIServerAddress) bool { return s.Addr == a }):
		return fmt.Sprintf("is an address of the API server"+why, KubernetesService)
	}
	if r, ok := containing(p.cfg.ProtectAddresses, a); ok {
		return fmt.Sprintf("lies in --protect-addresses %s"+why, r, KubernetesService)
	}
	return ""
}
