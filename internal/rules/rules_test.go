package rules

import (
	"errors"
	"net/netip"
	"os"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/iptables"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
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
	nodeCIDR.DetectLocalMode = ipvsproxy.DetectLocalNodeCIDR
	bridge := testConfig()
	bridge.DetectLocalMode, bridge.PodBridgeInterface = ipvsproxy.DetectLocalBridgeInterface, "cbr0"
	prefix := testConfig()
	prefix.DetectLocalMode, prefix.PodInterfaceNamePrefix = ipvsproxy.DetectLocalInterfaceNamePrefix, "cali"
	node1PodCIDRs := []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}
	for _, c := range []struct {
		name   string
		cfg    ipvsproxy.Config
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
			checkGolden(t, c.name, IPTables(c.cfg, c.family, ipvsproxy.NewLocalDetector(c.cfg, c.family, node1PodCIDRs)))
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
	noCIDR := testConfig()
	noCIDR.ClusterCIDRs = nil
	nodeCIDR := testConfig()
	nodeCIDR.DetectLocalMode = ipvsproxy.DetectLocalNodeCIDR
	prefix := testConfig()
	prefix.DetectLocalMode, prefix.PodInterfaceNamePrefix = ipvsproxy.DetectLocalInterfaceNamePrefix, "v-"
	bridge := testConfig()
	bridge.DetectLocalMode, bridge.PodBridgeInterface = ipvsproxy.DetectLocalBridgeInterface, "cbr0"
	podCIDRs := []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}
	for name, cfg := range map[string]ipvsproxy.Config{"cluster-cidr": testConfig(), "no-cluster-cidr": noCIDR, "node-cidr": nodeCIDR, "interface-prefix": prefix, "bridge": bridge} {
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
					if !Match(save, want, table) {
						t.Errorf("%s reads back differently:\n%s\nwant\n%s", table, save, want)
					}
				}
			})
		}
	}
}

// testConfig is the default configuration with a cluster CIDR.
func testConfig() ipvsproxy.Config {
	cfg := ipvsproxy.DefaultConfig()
	cfg.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	return cfg
}
