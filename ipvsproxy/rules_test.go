package ipvsproxy

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// The iptables rules depend only on the configuration and the local-traffic
// detector; their text is what iptables-save prints back (checked on the
// real kernel by TestProxierOnRealKernel, whose resync restores nothing).
func TestIPTablesRulesGolden(t *testing.T) {
	all := testConfig()
	all.MasqueradeAll = true
	noCIDR := testConfig()
	noCIDR.ClusterCIDRs = nil
	nodeCIDR := testConfig()
	nodeCIDR.DetectLocalMode = DetectLocalNodeCIDR
	bridge := testConfig()
	bridge.DetectLocalMode, bridge.PodBridgeInterface = DetectLocalBridgeInterface, "cbr0"
	prefix := testConfig()
	prefix.DetectLocalMode, prefix.PodInterfaceNamePrefix = DetectLocalInterfaceNamePrefix, "cali"
	node1PodCIDRs := []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}
	for _, c := range []struct {
		name   string
		cfg    Config
		family v1.IPFamily
	}{
		{"rules-ipv4", testConfig(), v1.IPv4Protocol},
		{"rules-ipv6-no-cluster-cidr", noCIDR, v1.IPv6Protocol},
		{"rules-ipv4-masquerade-all", all, v1.IPv4Protocol},
		{"rules-ipv4-node-cidr", nodeCIDR, v1.IPv4Protocol},
		{"rules-ipv4-bridge-interface", bridge, v1.IPv4Protocol},
		{"rules-ipv4-interface-name-prefix", prefix, v1.IPv4Protocol},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkGolden(t, c.name, iptablesRules(c.cfg, c.family, newLocalDetector(c.cfg, c.family, node1PodCIDRs)))
		})
	}
}

func TestLocalDetector(t *testing.T) {
	cidr := testConfig()
	nodeCIDR := testConfig()
	nodeCIDR.DetectLocalMode = DetectLocalNodeCIDR
	for _, c := range []struct {
		name     string
		cfg      Config
		family   v1.IPFamily
		podCIDRs []string
		want     string // ifNotLocal
	}{
		{"cluster CIDR", cidr, v1.IPv4Protocol, nil, "! -s 10.244.0.0/16"},
		{"cluster CIDR of the other family only", cidr, v1.IPv6Protocol, nil, ""},
		{"node CIDR", nodeCIDR, v1.IPv4Protocol, []string{"10.244.1.0/24"}, "! -s 10.244.1.0/24"},
		{"node CIDR, IPv6 of a dual-stack node", nodeCIDR, v1.IPv6Protocol, []string{"10.244.1.0/24", "fd00:1::/64"}, "! -s fd00:1::/64"},
		{"node CIDR not assigned yet", nodeCIDR, v1.IPv4Protocol, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			node := &v1.Node{Spec: v1.NodeSpec{PodCIDRs: c.podCIDRs}}
			d := newLocalDetector(c.cfg, c.family, podCIDRsOf(node))
			if got := joinArgs(d.ifNotLocal); got != c.want || d.implemented() != (c.want != "") {
				t.Errorf("ifNotLocal = %q (implemented %v), want %q", got, d.implemented(), c.want)
			}
		})
	}
}

func TestDetectLocalModeValidation(t *testing.T) {
	for _, c := range []struct {
		mode           LocalDetectMode
		bridge, prefix string
		ok             bool
	}{
		{"", "", "", true},
		{DetectLocalClusterCIDR, "", "", true},
		{DetectLocalNodeCIDR, "", "", true},
		{DetectLocalBridgeInterface, "", "", false},
		{DetectLocalBridgeInterface, "cbr0", "", true},
		{DetectLocalInterfaceNamePrefix, "", "", false},
		{DetectLocalInterfaceNamePrefix, "", "veth", true},
		{"PodCIDR", "", "", false},
	} {
		cfg := testConfig()
		cfg.DetectLocalMode, cfg.PodBridgeInterface, cfg.PodInterfaceNamePrefix = c.mode, c.bridge, c.prefix
		if err := cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("mode %q bridge %q prefix %q: Validate() = %v, want ok=%v", c.mode, c.bridge, c.prefix, err, c.ok)
		}
	}
}

func joinArgs(a []string) string {
	s := ""
	for i, x := range a {
		if i > 0 {
			s += " "
		}
		s += x
	}
	return s
}
