package nodeaddresses

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// ServiceName is the kubernetes.io/service-name label of the published
	// slices; no Service has it.
	ServiceName = "ipvsproxy-node-addresses"
	// managedBy is their endpointslice.kubernetes.io/managed-by label.
	managedBy = "node-addresses.ipvsproxy.io"
	// shards is how many slices per family hold the Nodes, each Node in
	// the one its name hashes to: an address change rewrites one slice
	// (about 80 endpoints at 5,000 Nodes), and a slice stays far below the
	// 1,000 endpoints the API allows up to 60,000 Nodes.
	shards = 64
)

// Addresses are the addresses of a Node the guard keeps off Services: its
// InternalIP and ExternalIP addresses, each once, unmapped, sorted.
func Addresses(node *v1.Node) []netip.Addr {
	var out []netip.Addr
	for _, na := range node.Status.Addresses {
		if na.Type != v1.NodeInternalIP && na.Type != v1.NodeExternalIP {
			continue
		}
		if a, err := netip.ParseAddr(na.Address); err == nil && a.Zone() == "" && !slices.Contains(out, a.Unmap()) {
			out = append(out, a.Unmap())
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// shardOf is the shard of a Node's name, the same in every process.
func shardOf(node string) int {
	h := fnv.New32a()
	h.Write([]byte(node))
	return int(h.Sum32() % shards)
}

// sliceName is the name of the slice of family holding shard.
func sliceName(family discovery.AddressType, shard int) string {
	return fmt.Sprintf("%s-%s-%02d", ServiceName, strings.ToLower(string(family)), shard)
}

// Slices are the slices that publish nodes (Node name to addresses) in
// namespace, by name: one per family and shard that holds an address, its
// endpoints sorted by Node, then address.
func Slices(namespace string, nodes map[string][]netip.Addr) map[string]*discovery.EndpointSlice {
	out := map[string]*discovery.EndpointSlice{}
	names := make([]string, 0, len(nodes))
	for name := range nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	ready := true
	for _, node := range names {
		for _, a := range nodes[node] {
			family := discovery.AddressTypeIPv4
			if !a.Is4() {
				family = discovery.AddressTypeIPv6
			}
			name := sliceName(family, shardOf(node))
			s := out[name]
			if s == nil {
				s = &discovery.EndpointSlice{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{
						discovery.LabelServiceName: ServiceName, discovery.LabelManagedBy: managedBy,
					}},
					AddressType: family,
				}
				out[name] = s
			}
			s.Endpoints = append(s.Endpoints, discovery.Endpoint{
				Addresses:  []string{a.String()},
				NodeName:   &node,
				Conditions: discovery.EndpointConditions{Ready: &ready},
			})
		}
	}
	return out
}

// sameEndpoints: have lists exactly want's endpoints, in order, and is
// labelled as want.
func sameEndpoints(have, want *discovery.EndpointSlice) bool {
	if have.AddressType != want.AddressType || len(have.Endpoints) != len(want.Endpoints) ||
		have.Labels[discovery.LabelServiceName] != ServiceName || have.Labels[discovery.LabelManagedBy] != managedBy {
		return false
	}
	for i := range want.Endpoints {
		h, w := have.Endpoints[i], want.Endpoints[i]
		if !slices.Equal(h.Addresses, w.Addresses) || h.NodeName == nil || *h.NodeName != *w.NodeName ||
			h.Conditions.Ready == nil || !*h.Conditions.Ready || len(have.Ports) != 0 {
			return false
		}
	}
	return true
}
