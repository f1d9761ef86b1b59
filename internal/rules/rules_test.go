package rules

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
)

// The iptables rules depend only on the configuration and the local-traffic
// detector; their text is what iptables-save prints back (checked on the
// real kernel by TestProxierOnRealKernel, whose resync restores nothing).
func TestIPTablesRulesGolden(t *testing.T) {
	v := variants()
	node1PodCIDRs := []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}
	for _, c := range []struct {
		name   string
		cfg    ipvsproxy.Config
		family v1.IPFamily
	}{
		{"rules-ipv4", v["cluster-cidr"], v1.IPv4Protocol},
		{"rules-ipv6-no-cluster-cidr", v["no-cluster-cidr"], v1.IPv6Protocol},
		{"rules-ipv4-masquerade-all", v["masquerade-all"], v1.IPv4Protocol},
		{"rules-ipv4-node-cidr", v["node-cidr"], v1.IPv4Protocol},
		{"rules-ipv4-bridge-interface", v["bridge-interface"], v1.IPv4Protocol},
		{"rules-ipv4-interface-name-prefix", v["interface-name-prefix"], v1.IPv4Protocol},
		{"rules-ipv4-accept-service-traffic", v["accept-service-traffic"], v1.IPv4Protocol},
	} {
		t.Run(c.name, func(t *testing.T) {
			servicetest.CheckGolden(t, filepath.Join("testdata", "rules", c.name+".golden"), IPTables(c.cfg, c.family, ipvsproxy.NewLocalDetector(c.cfg, c.family, node1PodCIDRs)))
		})
	}
}

// Every variant of the rules is taken by the real iptables (and ipset) in a
// fresh namespace and read back exactly as written, so a full sync restores
// nothing. Runs on any kernel with iptables and ipset (no IPVS needed).
func TestIPTablesRulesOnRealKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.NotRoot, "needs root")
	}
	podCIDRs := []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}
	for name, cfg := range variants() {
		for _, family := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
			t.Run(name+"/"+string(family), func(t *testing.T) {
				ns, path := netnstest.NewNamed(t, "ipvsproxy-r-")
				sets, err := ipset.NewInNamespace(ns)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range owned.Sets([]v1.IPFamily{family}, cfg.IPSetMaxElements) {
					if err := sets.CreateSet(s); err != nil {
						t.Fatal(err)
					}
				}
				fam := iptables.IPv4
				if family == v1.IPv6Protocol {
					fam = iptables.IPv6
				}
				ipt, err := iptables.New(fam, iptables.InNetNS(path))
				if errors.Is(err, iptables.ErrUnsupported) {
					kerneltest.Skip(t, kerneltest.NoTool, "no iptables: %v", err)
				}
				if err != nil {
					t.Fatal(err)
				}
				text := IPTables(cfg, family, ipvsproxy.NewLocalDetector(cfg, family, podCIDRs))
				for _, table := range owned.Tables {
					want := TableText(text, table)
					if err := ipt.Restore([]byte(want)); err != nil {
						t.Fatalf("restore %s: %v\n%s", table, err, want)
					}
					save, err := ipt.Save(table)
					if err != nil {
						t.Fatal(err)
					}
					if !match(save, want, table) {
						t.Errorf("%s reads back differently:\n%s\nwant\n%s", table, save, want)
					}
				}
			})
		}
	}
}

// variants are the configurations the rules differ by, by name: the
// defaults with a cluster CIDR, and one change each.
func variants() map[string]ipvsproxy.Config {
	base := func(change func(*ipvsproxy.Config)) ipvsproxy.Config {
		cfg := ipvsproxy.DefaultConfig()
		cfg.ClusterCIDRs = []netip.Prefix{servicetest.PodCIDR}
		change(&cfg)
		return cfg
	}
	return map[string]ipvsproxy.Config{
		"cluster-cidr":    base(func(*ipvsproxy.Config) {}),
		"no-cluster-cidr": base(func(c *ipvsproxy.Config) { c.ClusterCIDRs = nil }),
		"masquerade-all":  base(func(c *ipvsproxy.Config) { c.MasqueradeAll = true }),
		"node-cidr":       base(func(c *ipvsproxy.Config) { c.DetectLocalMode = ipvsproxy.DetectLocalNodeCIDR }),
		"bridge-interface": base(func(c *ipvsproxy.Config) {
			c.DetectLocalMode, c.PodBridgeInterface = ipvsproxy.DetectLocalBridgeInterface, "cbr0"
		}),
		"interface-name-prefix": base(func(c *ipvsproxy.Config) {
			c.DetectLocalMode, c.PodInterfaceNamePrefix = ipvsproxy.DetectLocalInterfaceNamePrefix, "cali"
		}),
		"accept-service-traffic": base(func(c *ipvsproxy.Config) { c.AcceptServiceTraffic = true }),
		"dual-stack-cluster-cidrs-other-mark": base(func(c *ipvsproxy.Config) {
			c.ClusterCIDRs = append(c.ClusterCIDRs, netip.MustParsePrefix("fd00:10:244::/56"))
			c.MasqueradeMark = 0x8000
		}),
	}
}
