package ipvsproxy

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

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
			d := NewLocalDetector(c.cfg, c.family, PodCIDRsOf(node))
			if got := strings.Join(d.IfNotLocal, " "); got != c.want || d.Implemented() != (c.want != "") {
				t.Errorf("ifNotLocal = %q (implemented %v), want %q", got, d.Implemented(), c.want)
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
