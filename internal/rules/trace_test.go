package rules

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
)

// The tracer evaluates one traceRule per rule of IPTables: this test
// fails when a rule changes without its verdict in trace_rules.go.
func TestTracerModelsEveryRule(t *testing.T) {
	all := testConfig()
	all.MasqueradeAll = true
	noCIDR := testConfig()
	noCIDR.ClusterCIDRs = nil
	dual := testConfig()
	dual.ClusterCIDRs = append(dual.ClusterCIDRs, netip.MustParsePrefix("fd00:10:244::/56"))
	dual.MasqueradeMark = 0x8000
	nodeCIDR := testConfig()
	nodeCIDR.DetectLocalMode = ipvsproxy.DetectLocalNodeCIDR
	bridge := testConfig()
	bridge.DetectLocalMode, bridge.PodBridgeInterface = ipvsproxy.DetectLocalBridgeInterface, "cbr0"
	prefix := testConfig()
	prefix.DetectLocalMode, prefix.PodInterfaceNamePrefix = ipvsproxy.DetectLocalInterfaceNamePrefix, "veth"
	podCIDRs := []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}
	for _, c := range []struct {
		name   string
		cfg    ipvsproxy.Config
		family v1.IPFamily
	}{
		{"ipv4", testConfig(), v1.IPv4Protocol},
		{"ipv6 without cluster CIDR", noCIDR, v1.IPv6Protocol},
		{"ipv4 masquerade-all", all, v1.IPv4Protocol},
		{"ipv6 with cluster CIDR and another mark", dual, v1.IPv6Protocol},
		{"ipv4 node CIDR", nodeCIDR, v1.IPv4Protocol},
		{"ipv6 node CIDR not known", nodeCIDR, v1.IPv6Protocol},
		{"ipv4 bridge interface", bridge, v1.IPv4Protocol},
		{"ipv4 interface name prefix", prefix, v1.IPv4Protocol},
	} {
		t.Run(c.name, func(t *testing.T) {
			local := ipvsproxy.NewLocalDetector(c.cfg, c.family, podCIDRs)
			text := IPTables(c.cfg, c.family, local)
			traced := traceRules(c.cfg, c.family, local)
			for _, table := range owned.Tables {
				for _, chain := range owned.Chains[table] {
					var want, got []string
					for _, line := range strings.Split(TableText(text, table), "\n") {
						if strings.HasPrefix(line, "-A "+chain+" ") {
							want = append(want, line)
						}
					}
					for _, r := range traced[string(table)+" "+chain] {
						got = append(got, r.text)
					}
					if !slices.Equal(got, want) {
						t.Errorf("%s %s: the tracer models\n  %s\nbut the rules are\n  %s\n(update trace_rules.go with rules.go)",
							table, chain, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
					}
				}
			}
		})
	}
}
