package ipvsproxy

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// The iptables rules depend only on the configuration; their text is what
// iptables-save prints back (checked on the real kernel by
// TestProxierOnRealKernel, whose resync restores nothing).
func TestIPTablesRulesGolden(t *testing.T) {
	all := testConfig()
	all.MasqueradeAll = true
	noCIDR := testConfig()
	noCIDR.ClusterCIDRs = nil
	for _, c := range []struct {
		name   string
		cfg    Config
		family v1.IPFamily
	}{
		{"rules-ipv4", testConfig(), v1.IPv4Protocol},
		{"rules-ipv6-no-cluster-cidr", noCIDR, v1.IPv6Protocol},
		{"rules-ipv4-masquerade-all", all, v1.IPv4Protocol},
	} {
		t.Run(c.name, func(t *testing.T) { checkGolden(t, c.name, iptablesRules(c.cfg, c.family)) })
	}
}
