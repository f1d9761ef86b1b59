package ipvsproxy

import (
	"net/netip"
	"slices"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/listeners"
	"k8s.io/apimachinery/pkg/types"
)

// guardFacts are the facts of the node guard a build read.
type guardFacts struct {
	listening  []listeners.Listener
	otherNodes map[netip.Addr]string
	apiServers []netip.Addr
}

// guardDependents lists the Services to rebuild because a fact of the
// address guard changed since the last build: those holding or naming (as
// a cluster, external or ingress IP) an address whose Node or API server
// role changed, or any address of this node when what listens on it
// changed; with --refuse-node-endpoints also those with an endpoint at an
// address whose role changed, which the endpoint policy reads.
func (m *Model) guardDependents(now guardFacts, node NodeInfo) []types.NamespacedName {
	before := m.guard
	m.guard = now
	var addrs []netip.Addr
	for a, name := range now.otherNodes {
		if before.otherNodes[a] != name {
			addrs = append(addrs, a)
		}
	}
	for a := range before.otherNodes {
		if _, ok := now.otherNodes[a]; !ok {
			addrs = append(addrs, a)
		}
	}
	if !slices.Equal(before.apiServers, now.apiServers) {
		addrs = append(addrs, before.apiServers...)
		addrs = append(addrs, now.apiServers...)
	}
	var out []types.NamespacedName
	if m.cfg.RefuseNodeEndpoints && len(addrs) > 0 {
		// A scan of every endpoint, only when a Node's or the API server's
		// addresses changed: rare beside endpoint changes.
		out = m.tracker.AppendServicesWithEndpointsAt(out, addrs)
	}
	if !slices.Equal(before.listening, now.listening) {
		addrs = append(addrs, node.Addresses...)
	}
	for _, a := range addrs {
		out = m.clusterIPs.AppendUsers(out, a.Unmap())
	}
	return out
}
