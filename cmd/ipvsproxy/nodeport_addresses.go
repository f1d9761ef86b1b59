package main

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/kubeapi"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// --nodeport-addresses (nodePortAddresses) keywords besides CIDRs.
const (
	nodePortAll       = "all"       // every address: the same as empty
	nodePortPrimary   = "primary"   // the Node object's primary address of each family
	nodePortLocalhost = "localhost" // refused: IPVS serves no NodePort on loopback
)

// parseNodePortAddresses reads --nodeport-addresses as kube-proxy does, per
// family (pkg/proxy/util/nodeport_addresses.go): a family none of whose
// CIDRs is in the list serves NodePorts on all its addresses, so an
// IPv4-only list does not switch IPv6 NodePorts off. That rule is applied
// here, once, by adding the family's /0; the builder and the health-check
// server then only test "inside one of the prefixes". "primary" returns no
// prefixes: resolvePrimaryNodePortAddresses replaces it at start-up.
func parseNodePortAddresses(value string) ([]netip.Prefix, error) {
	switch strings.ToLower(strings.TrimSpace(value)) {
	case "", nodePortAll:
		return nil, nil
	case nodePortPrimary:
		return nil, nil
	case nodePortLocalhost:
		return nil, fmt.Errorf("--nodeport-addresses=%s: IPVS cannot serve NodePorts on loopback addresses (kubernetes#96879)", value)
	}
	prefixes, err := parseCIDRs("nodeport-addresses", value)
	if err != nil || len(prefixes) == 0 {
		return prefixes, err
	}
	has4 := slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Addr().Is4() })
	has6 := slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return !p.Addr().Is4() })
	if !has4 {
		prefixes = append(prefixes, netip.MustParsePrefix("0.0.0.0/0"))
	}
	if !has6 {
		prefixes = append(prefixes, netip.MustParsePrefix("::/0"))
	}
	return prefixes, nil
}

// resolvePrimaryNodePortAddresses turns --nodeport-addresses=primary into the
// node's primary addresses, read from its Node object as kube-proxy reads
// them at start-up (the first InternalIP of each family, else the first
// ExternalIP). It waits for the Node (a kubelet registers it) up to timeout.
func resolvePrimaryNodePortAddresses(ctx context.Context, client kubeapi.Client, nodeName string, timeout time.Duration) ([]netip.Prefix, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		node, err := readNode(ctx, client, nodeName)
		if err == nil {
			if addrs := primaryNodeAddresses(node); len(addrs) > 0 {
				out := make([]netip.Prefix, 0, len(addrs))
				for _, a := range addrs {
					out = append(out, netip.PrefixFrom(a, a.BitLen()))
				}
				klog.InfoS("NodePorts on the node's primary addresses", "addresses", addrs)
				return out, nil
			}
			err = fmt.Errorf("node %s has no InternalIP or ExternalIP", nodeName)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("--nodeport-addresses=primary: read the primary addresses of node %s: %w", nodeName, err)
		case <-time.After(time.Second):
		}
	}
}

// primaryNodeAddresses is the first InternalIP of each family, or the first
// ExternalIP when a family has no InternalIP (k8s.io/component-helpers
// GetNodeHostIPs).
func primaryNodeAddresses(node *v1.Node) []netip.Addr {
	var out []netip.Addr
	for _, kind := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP} {
		for _, na := range node.Status.Addresses {
			a, err := netip.ParseAddr(na.Address)
			if na.Type != kind || err != nil {
				continue
			}
			a = a.Unmap()
			if !slices.ContainsFunc(out, func(b netip.Addr) bool { return b.Is4() == a.Is4() }) {
				out = append(out, a)
			}
		}
	}
	return out
}
