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
	v := variants()
	podCIDRs := []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}
	for _, c := range []struct {
		name   string
		cfg    ipvsproxy.Config
		family v1.IPFamily
	}{
		{"ipv4", v["cluster-cidr"], v1.IPv4Protocol},
		{"ipv6 without cluster CIDR", v["no-cluster-cidr"], v1.IPv6Protocol},
		{"ipv4 masquerade-all", v["masquerade-all"], v1.IPv4Protocol},
		{"ipv6 with cluster CIDR and another mark", v["dual-stack-cluster-cidrs-other-mark"], v1.IPv6Protocol},
		{"ipv4 node CIDR", v["node-cidr"], v1.IPv4Protocol},
		{"ipv6 node CIDR not known", v["node-cidr"], v1.IPv6Protocol},
		{"ipv4 bridge interface", v["bridge-interface"], v1.IPv4Protocol},
		{"ipv4 interface name prefix", v["interface-name-prefix"], v1.IPv4Protocol},
		{"ipv6 accepting service traffic", v["accept-service-traffic"], v1.IPv6Protocol},
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
