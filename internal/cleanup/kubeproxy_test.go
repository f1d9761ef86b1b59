package cleanup

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters/adapterstest"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/nftables"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
)

// kubeProxyIPTablesMode is part of what kube-proxy v1.36's iptables mode
// writes (iptables-save of a node with one Service), plus kubelet's own
// chain, which is not kube-proxy's.
const kubeProxyIPTablesMode = `*nat
:KUBE-SERVICES - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-SVC-ABCDEFGHIJKLMNOP - [0:0]
:KUBE-SEP-QRSTUVWXYZ012345 - [0:0]
:KUBE-PROXY-CANARY - [0:0]
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment "default/web cluster IP" -j KUBE-SVC-ABCDEFGHIJKLMNOP
-A KUBE-SVC-ABCDEFGHIJKLMNOP -j KUBE-SEP-QRSTUVWXYZ012345
-A KUBE-SEP-QRSTUVWXYZ012345 -p tcp -j DNAT --to-destination 10.244.1.5:8080
COMMIT
*filter
:KUBE-EXTERNAL-SERVICES - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-FIREWALL - [0:0]
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS
-A INPUT -j KUBE-FIREWALL
-A KUBE-EXTERNAL-SERVICES -d 192.0.2.7/32 -p tcp -j REJECT --reject-with icmp-port-unreachable
COMMIT
*mangle
:KUBE-PROXY-CANARY - [0:0]
COMMIT
`

// On a node where ipvsproxy already runs, kube-proxy's leftovers go and
// ipvsproxy's own state (chains, jumps, sets, all named like kube-proxy's
// IPVS mode) stays exactly as it was; kubelet's chain stays; a second run
// removes nothing.
func TestCleanupKubeProxyLeftoversKeepsOurs(t *testing.T) {
	node := adapterstest.NewFakes()
	cfg := config(false, v1.IPv4Protocol)
	p := serving(t, node, cfg, servicetest.Service("web", "10.96.0.10"))
	oursRules := node.IPT4.Dump()
	oursSets := node.IPSet.Dump()

	if err := node.IPT4.Restore([]byte(kubeProxyIPTablesMode)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"KUBE-LOAD-BALANCER-SOURCE-CIDR", "KUBE-NODE-PORT-LOCAL-TCP", "KUBE-6-LOAD-BALANCER-LOCAL"} {
		fam := ipset.IPv4
		if strings.HasPrefix(name, "KUBE-6-") {
			fam = ipset.IPv6
		}
		if err := node.IPSet.CreateSet(ipset.Set{Name: name, Type: ipset.HashIPPort, Family: fam}); err != nil {
			t.Fatal(err)
		}
	}
	if err := node.IPSet.CreateSet(ipset.Set{Name: "OTHER-SET", Type: ipset.HashIP, Family: ipset.IPv4}); err != nil {
		t.Fatal(err)
	}

	removed, err := KubeProxyLeftovers(node.Kernel(), nil, cfg.Families)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 15 {
		t.Errorf("removed %d objects, want 3 jumps, 8 chains, kube-proxy's rules in KUBE-SERVICES and 3 sets:\n%s", len(removed), strings.Join(removed, "\n"))
	}
	got := node.IPT4.Dump()
	for _, gone := range []string{"KUBE-SVC-", "KUBE-SEP-", "KUBE-NODEPORTS", "KUBE-EXTERNAL-SERVICES", "KUBE-PROXY-FIREWALL", "KUBE-PROXY-CANARY", "10.96.0.10/32"} {
		if strings.Contains(got, gone) {
			t.Errorf("%s left:\n%s", gone, got)
		}
	}
	if !strings.Contains(got, "-A INPUT -j KUBE-FIREWALL") || !strings.Contains(got, ":KUBE-FIREWALL") {
		t.Errorf("kubelet's KUBE-FIREWALL removed:\n%s", got)
	}
	sets := node.IPSet.Dump()
	if !strings.Contains(sets, "OTHER-SET") || strings.Contains(sets, "KUBE-LOAD-BALANCER-SOURCE-CIDR") || strings.Contains(sets, "-LOCAL-TCP") || strings.Contains(sets, "LOAD-BALANCER-LOCAL") {
		t.Errorf("sets after cleanup:\n%s", sets)
	}
	// The daemon's next full sync writes its own state back to what it was.
	p.RequestFullSync()
	mustSync(t, p)
	if got := stripChain(node.IPT4.Dump(), "KUBE-FIREWALL"); got != oursRules {
		t.Errorf("ipvsproxy's rules after cleanup and a sync:\n%s\nwant\n%s", got, oursRules)
	}
	if got := stripSet(node.IPSet.Dump(), "OTHER-SET"); got != oursSets {
		t.Errorf("ipvsproxy's sets after cleanup:\n%s\nwant\n%s", got, oursSets)
	}
	again, err := KubeProxyLeftovers(node.Kernel(), nil, cfg.Families)
	if err != nil || len(again) != 0 {
		t.Errorf("second run removed %v (%v), want nothing", again, err)
	}
	if res := mustSync(t, p); res.Writes != 0 {
		t.Errorf("the next sync wrote %d objects: cleanup changed ipvsproxy's state", res.Writes)
	}
}

// kubeProxyIPVSMode is part of what kube-proxy v1.36's IPVS mode writes
// for one family (pkg/proxy/ipvs/proxier.go writeIptablesRules): rules in
// chains of ipvsproxy's names that match sets ipvsproxy has no use for
// (%[1]s is the set prefix, KUBE- or KUBE-6-; IPv6 names are cut to 31
// bytes).
const kubeProxyIPVSMode = `*nat
:KUBE-SERVICES - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-MARK-MASQ - [0:0]
-A KUBE-SERVICES -m comment --comment "Kubernetes service external ip + port with externalTrafficPolicy=local" -m set --match-set %[1]sEXTERNAL-IP-LOCAL dst,dst -m addrtype --dst-type LOCAL -j ACCEPT
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
-A KUBE-SERVICES -m set --match-set %[1]sCLUSTER-IP dst,dst -j ACCEPT
-A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port with externalTrafficPolicy=local" -m set --match-set %[1]sNODE-PORT-LOCAL-TCP dst -j RETURN
-A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port for masquerade purpose" -m set --match-set %[1]sNODE-PORT-TCP dst -j KUBE-MARK-MASQ
COMMIT
*filter
:KUBE-IPVS-FILTER - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-SOURCE-RANGES-FIREWALL - [0:0]
-A INPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
-A KUBE-PROXY-FIREWALL -m set --match-set %[1]sLOAD-BALANCER-FW dst,dst -j KUBE-SOURCE-RANGES-FIREWALL
-A KUBE-SOURCE-RANGES-FIREWALL -m set --match-set %[2]s dst,dst,src -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set %[1]sCLUSTER-IP dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set %[1]sEXTERNAL-IP-LOCAL dst,dst -j RETURN
COMMIT
`

// After kube-proxy's IPVS mode (both families) and nftables mode, its
// nftables tables go, and its rules that match its
// own sets go before those sets, even in chains of ipvsproxy's names (the
// kernel refuses to destroy a set a rule names: "set in use"); its sets
// named like ipvsproxy's stay for the adoption of its virtual servers, and
// so do its rules that name only those. A second run removes nothing.
func TestCleanupKubeProxyIPVSModeRemovesRulesBeforeSets(t *testing.T) {
	node := adapterstest.NewFakes()
	for _, fam := range []struct {
		ipt    *iptables.Fake
		prefix string
		cidr   string // KUBE-LOAD-BALANCER-SOURCE-CIDR as kube-proxy names it
		family ipset.Family
	}{{node.IPT4, "KUBE-", "KUBE-LOAD-BALANCER-SOURCE-CIDR", ipset.IPv4}, {node.IPT6, "KUBE-6-", "KUBE-6-LOAD-BALANCER-SOURCE-CID", ipset.IPv6}} {
		for _, base := range []string{"EXTERNAL-IP-LOCAL", "CLUSTER-IP", "NODE-PORT-LOCAL-TCP", "NODE-PORT-TCP", "LOAD-BALANCER-FW"} {
			if err := node.IPSet.CreateSet(ipset.Set{Name: fam.prefix + base, Type: ipset.HashIPPort, Family: fam.family}); err != nil {
				t.Fatal(err)
			}
		}
		if err := node.IPSet.CreateSet(ipset.Set{Name: fam.cidr, Type: ipset.HashIPPortNet, Family: fam.family}); err != nil {
			t.Fatal(err)
		}
		if err := fam.ipt.Restore([]byte(fmt.Sprintf(kubeProxyIPVSMode, fam.prefix, fam.cidr))); err != nil {
			t.Fatal(err)
		}
	}
	// And its nftables mode, beside a table of someone else's.
	nft := nftables.NewFake()
	nft.AddTable(nftables.IPv4, "kube-proxy")
	nft.AddTable(nftables.IPv6, "kube-proxy")
	nft.AddTable(nftables.IPv4, "other")
	// node.Kernel(), as the kernel: a set that a rule names is busy.
	removed, err := KubeProxyLeftovers(node.Kernel(), nft, bothFamilies)
	if err != nil {
		t.Fatalf("%v\nremoved:\n%s", err, strings.Join(removed, "\n"))
	}
	sets := node.IPSet.Dump()
	for _, gone := range []string{"EXTERNAL-IP-LOCAL", "NODE-PORT-LOCAL-TCP", "SOURCE-CID"} {
		if strings.Contains(sets, gone) {
			t.Errorf("kube-proxy's set *%s* left:\n%s", gone, sets)
		}
	}
	for _, kept := range []string{"set KUBE-CLUSTER-IP ", "set KUBE-6-CLUSTER-IP ", "set KUBE-NODE-PORT-TCP ", "set KUBE-6-LOAD-BALANCER-FW "} {
		if !strings.Contains(sets, kept) {
			t.Errorf("%q (a name of ipvsproxy's) removed:\n%s", kept, sets)
		}
	}
	for _, rules := range []string{node.IPT4.Dump(), node.IPT6.Dump()} {
		for _, gone := range []string{"-LOCAL", "KUBE-PROXY-FIREWALL", "KUBE-SOURCE-RANGES-FIREWALL", "SOURCE-CID"} {
			if strings.Contains(rules, gone) {
				t.Errorf("%s left:\n%s", gone, rules)
			}
		}
		for _, kept := range []string{"CLUSTER-IP dst,dst -j ACCEPT", "CLUSTER-IP dst,dst -j RETURN", "NODE-PORT-TCP dst -j KUBE-MARK-MASQ", "-m addrtype --dst-type LOCAL -j KUBE-NODE-PORT"} {
			if !strings.Contains(rules, kept) {
				t.Errorf("%q removed:\n%s", kept, rules)
			}
		}
	}
	if got := nft.Dump(); got != "table ip other" {
		t.Errorf("nftables tables after cleanup:\n%s\nwant only table ip other", got)
	}
	if again, err := KubeProxyLeftovers(node.Kernel(), nft, bothFamilies); err != nil || len(again) != 0 {
		t.Errorf("second run removed %v (%v), want nothing", again, err)
	}
}

// stripChain removes chain's declaration and rules (and jumps to it).
func stripChain(dump, chain string) string {
	var out []string
	for _, l := range strings.Split(dump, "\n") {
		if strings.HasPrefix(l, ":"+chain+" ") || strings.HasPrefix(l, "-A "+chain+" ") || strings.HasSuffix(l, "-j "+chain) {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// stripSet removes a set's lines from an ipset fake's dump.
func stripSet(dump, name string) string {
	var out []string
	for _, l := range strings.Split(dump, "\n") {
		if strings.Contains(l, name) {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
