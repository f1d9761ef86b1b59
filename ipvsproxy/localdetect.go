package ipvsproxy

import (
	"fmt"
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// LocalDetectMode is how the rules recognise traffic from pods (kube-proxy's
// --detect-local-mode): such traffic keeps its source address to cluster
// IPs, and reaches the cluster endpoints of a Local-policy address that has
// no endpoint on this node.
type LocalDetectMode string

const (
	// DetectLocalClusterCIDR: the source is in --cluster-cidr.
	DetectLocalClusterCIDR LocalDetectMode = "ClusterCIDR"
	// DetectLocalNodeCIDR: the source is in this Node's spec.podCIDRs.
	DetectLocalNodeCIDR LocalDetectMode = "NodeCIDR"
	// DetectLocalBridgeInterface: the packet came in on --pod-bridge-interface.
	DetectLocalBridgeInterface LocalDetectMode = "BridgeInterface"
	// DetectLocalInterfaceNamePrefix: it came in on an interface named
	// --pod-interface-name-prefix*.
	DetectLocalInterfaceNamePrefix LocalDetectMode = "InterfaceNamePrefix"
)

// validate checks that the mode is known and has what it needs.
func (m LocalDetectMode) validate(c Config) error {
	switch m {
	case "", DetectLocalClusterCIDR, DetectLocalNodeCIDR:
		return nil
	case DetectLocalBridgeInterface:
		if c.PodBridgeInterface == "" {
			return fmt.Errorf("detect-local-mode %s needs a pod bridge interface", m)
		}
		return nil
	case DetectLocalInterfaceNamePrefix:
		if c.PodInterfaceNamePrefix == "" {
			return fmt.Errorf("detect-local-mode %s needs a pod interface name prefix", m)
		}
		return nil
	}
	return fmt.Errorf("unknown detect-local-mode %q (want ClusterCIDR, NodeCIDR, BridgeInterface or InterfaceNamePrefix)", m)
}

// LocalDetector is the one place that decides which packets come from pods,
// as iptables match arguments. Without a way to tell (ClusterCIDR mode with
// no --cluster-cidr of the family, NodeCIDR before the Node has a pod CIDR)
// it matches nothing: ifLocal and ifNotLocal are both empty and the rules
// use kube-proxy's fallbacks.
type LocalDetector struct {
	ifLocal, IfNotLocal []string
	// What the arguments match, for the tracer: a source range, or an
	// input interface (a trailing "+" matches a name prefix, as in iptables).
	source  netip.Prefix
	inIface string
}

// NewLocalDetector builds the detector of family from the configuration
// and, for NodeCIDR, this Node's pod CIDRs.
func NewLocalDetector(cfg Config, family v1.IPFamily, nodePodCIDRs []netip.Prefix) LocalDetector {
	byCIDR := func(cidrs []netip.Prefix) LocalDetector {
		// Like kube-proxy, one range per family decides.
		for _, p := range cidrs {
			if p.IsValid() && FamilyOf(p.Addr()) == family {
				s := p.Masked().String()
				return LocalDetector{ifLocal: []string{"-s", s}, IfNotLocal: []string{"!", "-s", s}, source: p.Masked()}
			}
		}
		return LocalDetector{}
	}
	byInterface := func(name string) LocalDetector {
		return LocalDetector{ifLocal: []string{"-i", name}, IfNotLocal: []string{"!", "-i", name}, inIface: name}
	}
	switch cfg.DetectLocalMode {
	case DetectLocalNodeCIDR:
		return byCIDR(nodePodCIDRs)
	case DetectLocalBridgeInterface:
		return byInterface(cfg.PodBridgeInterface)
	case DetectLocalInterfaceNamePrefix:
		return byInterface(cfg.PodInterfaceNamePrefix + "+")
	default:
		return byCIDR(cfg.ClusterCIDRs)
	}
}

// Implemented reports whether the detector can tell pod traffic apart.
func (d LocalDetector) Implemented() bool { return len(d.ifLocal) > 0 }

// FromPod is what the ifLocal arguments match: a packet from src that came
// in on inIface ("" when unknown, which no interface rule matches).
func (d LocalDetector) FromPod(src netip.Addr, inIface string) bool {
	switch {
	case d.source.IsValid():
		return d.source.Contains(src)
	case strings.HasSuffix(d.inIface, "+"):
		return inIface != "" && strings.HasPrefix(inIface, strings.TrimSuffix(d.inIface, "+"))
	case d.inIface != "":
		return inIface == d.inIface
	}
	return false
}

// String says in a few words what the detector takes for pod traffic.
func (d LocalDetector) String() string {
	switch {
	case d.source.IsValid():
		return "from " + d.source.String()
	case d.inIface != "":
		return "in on " + d.inIface
	}
	return "nothing"
}
