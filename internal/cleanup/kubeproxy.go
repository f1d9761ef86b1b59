package cleanup

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/nftables"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// What kube-proxy v1.36 leaves on a node when it is replaced, by its iptables
// and ipvs modes (pkg/proxy/iptables/cleanup.go and proxier.go
// iptablesJumpChains, isServiceChainName; pkg/proxy/ipvs/cleanup.go,
// proxier.go iptablesJumpChain, iptablesCleanupChains, ipsetInfo). Many names
// are also ipvsproxy's (KUBE-SERVICES in nat, KUBE-CLUSTER-IP, kube-ipvs0):
// those are never removed here; ipvsproxy rewrites them whole on its first
// sync, and adopts kube-proxy's virtual servers as an older ipvsproxy's
// (internal/proxier ownership.go, the legacy rule). What remains is kube-proxy's alone, and
// would otherwise keep acting on packets: KUBE-SVC-* chains DNAT to old
// endpoints, KUBE-EXTERNAL-SERVICES rejects, KUBE-PROXY-FIREWALL drops. Its
// nftables mode leaves two tables of its own, deleted whole.

// kubeProxyNFTablesTable is the table of kube-proxy's nftables mode, in
// families ip and ip6 (pkg/proxy/nftables/proxier.go kubeProxyTable).
const kubeProxyNFTablesTable = "kube-proxy"

// kubeProxyJump is one jump kube-proxy adds from a built-in chain.
type kubeProxyJump struct {
	table iptables.Table
	chain string
	rule  []string
}

func kubeProxyJumps() []kubeProxyJump {
	j := func(table iptables.Table, chain, target, comment string, extra ...string) kubeProxyJump {
		rule := append(append([]string{}, extra...), "-m", "comment", "--comment", comment, "-j", target)
		return kubeProxyJump{table, chain, rule}
	}
	newOnly := []string{"-m", "conntrack", "--ctstate", "NEW"}
	return []kubeProxyJump{
		// iptables mode
		j(iptables.TableFilter, "INPUT", "KUBE-EXTERNAL-SERVICES", "kubernetes externally-visible service portals", newOnly...),
		j(iptables.TableFilter, "FORWARD", "KUBE-EXTERNAL-SERVICES", "kubernetes externally-visible service portals", newOnly...),
		j(iptables.TableFilter, "INPUT", "KUBE-NODEPORTS", "kubernetes health check service ports"),
		j(iptables.TableFilter, "FORWARD", "KUBE-SERVICES", "kubernetes service portals", newOnly...),
		j(iptables.TableFilter, "OUTPUT", "KUBE-SERVICES", "kubernetes service portals", newOnly...),
		j(iptables.TableFilter, "FORWARD", "KUBE-FORWARD", "kubernetes forwarding rules"),
		j(iptables.TableFilter, "INPUT", "KUBE-PROXY-FIREWALL", "kubernetes load balancer firewall", newOnly...),
		j(iptables.TableFilter, "OUTPUT", "KUBE-PROXY-FIREWALL", "kubernetes load balancer firewall", newOnly...),
		j(iptables.TableFilter, "FORWARD", "KUBE-PROXY-FIREWALL", "kubernetes load balancer firewall", newOnly...),
		j(iptables.TableNAT, "OUTPUT", "KUBE-SERVICES", "kubernetes service portals"),
		j(iptables.TableNAT, "PREROUTING", "KUBE-SERVICES", "kubernetes service portals"),
		j(iptables.TableNAT, "POSTROUTING", "KUBE-POSTROUTING", "kubernetes postrouting rules"),
		// ipvs mode (the nat jumps are the same as above)
		j(iptables.TableFilter, "INPUT", "KUBE-NODE-PORT", "kubernetes health check rules"),
		j(iptables.TableFilter, "INPUT", "KUBE-PROXY-FIREWALL", "kube-proxy firewall rules"),
		j(iptables.TableFilter, "FORWARD", "KUBE-PROXY-FIREWALL", "kube-proxy firewall rules"),
		j(iptables.TableFilter, "INPUT", "KUBE-IPVS-FILTER", "kubernetes ipvs access filter"),
		j(iptables.TableFilter, "OUTPUT", "KUBE-IPVS-OUT-FILTER", "kubernetes ipvs access filter"),
	}
}

// kubeProxyChains are kube-proxy's chains by table; kubeProxyChainPrefixes
// its per-Service and per-endpoint chains (nat).
var kubeProxyChains = map[iptables.Table][]string{
	iptables.TableNAT:    {"KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ", "KUBE-PROXY-CANARY", "KUBE-NODE-PORT", "KUBE-LOAD-BALANCER"},
	iptables.TableFilter: {"KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-FORWARD", "KUBE-NODEPORTS", "KUBE-PROXY-FIREWALL", "KUBE-PROXY-CANARY", "KUBE-NODE-PORT", "KUBE-SOURCE-RANGES-FIREWALL", "KUBE-IPVS-FILTER", "KUBE-IPVS-OUT-FILTER"},
	iptables.TableMangle: {"KUBE-PROXY-CANARY"},
}

var kubeProxyChainPrefixes = []string{"KUBE-SVC-", "KUBE-SVL-", "KUBE-SEP-", "KUBE-FW-", "KUBE-EXT-"}

// kubeProxySets are the ipvs mode's sets (pkg/proxy/ipvs/proxier.go
// ipsetInfo), by their IPv4 names.
var kubeProxySets = []string{
	"KUBE-LOOP-BACK", "KUBE-CLUSTER-IP", "KUBE-EXTERNAL-IP", "KUBE-EXTERNAL-IP-LOCAL",
	"KUBE-LOAD-BALANCER", "KUBE-LOAD-BALANCER-FW", "KUBE-LOAD-BALANCER-LOCAL",
	"KUBE-LOAD-BALANCER-SOURCE-IP", "KUBE-LOAD-BALANCER-SOURCE-CIDR",
	"KUBE-NODE-PORT-TCP", "KUBE-NODE-PORT-LOCAL-TCP", "KUBE-NODE-PORT-UDP", "KUBE-NODE-PORT-LOCAL-UDP",
	"KUBE-NODE-PORT-SCTP-HASH", "KUBE-NODE-PORT-LOCAL-SCTP-HASH", "KUBE-HEALTH-CHECK-NODE-PORT", "KUBE-IPVS-IPS",
}

// kubeProxySetNames are the names of kube-proxy's IPVS-mode sets in both
// families: the ones it takes back when it returns (AfterKubeProxyIPVS
// leaves those).
func kubeProxySetNames() map[string]bool {
	names := make(map[string]bool, 2*len(kubeProxySets))
	for _, name := range kubeProxySets {
		names[name], names[kubeProxyIPv6SetName(name)] = true, true
	}
	return names
}

// kubeProxyIPv6SetName is kube-proxy's name of its IPv6 set: "KUBE-6-"
// for "KUBE-", cut to ipset's 31 bytes (pkg/proxy/ipvs/ipset.go NewIPSet),
// so KUBE-LOAD-BALANCER-SOURCE-CIDR is KUBE-6-LOAD-BALANCER-SOURCE-CID.
func kubeProxyIPv6SetName(name string) string {
	name = "KUBE-6-" + strings.TrimPrefix(name, "KUBE-")
	if len(name) > ipsetMaxNameLen {
		name = name[:ipsetMaxNameLen]
	}
	return name
}

// ipsetMaxNameLen is IPSET_MAXNAMELEN less its NUL.
const ipsetMaxNameLen = 31

// kubeProxyOnlySets are the names of kube-proxy's sets, both families,
// that ipvsproxy does not use: the sets the clean-up destroys and whose
// rules it removes first.
var kubeProxyOnlySets = func() []string {
	ours := map[string]bool{}
	for _, s := range owned.Sets(bothFamilies, 0) {
		ours[s.Name] = true
	}
	var out []string
	for _, name := range kubeProxySets {
		for _, n := range []string{name, kubeProxyIPv6SetName(name)} {
			if !ours[n] {
				out = append(out, n)
			}
		}
	}
	return out
}()

// KubeProxyLeftovers is `ipvsproxy cleanup --kube-proxy-leftovers`: it
// removes, for the families, what kube-proxy's iptables, ipvs and
// nftables modes left that ipvsproxy does not use itself: its jumps that are
// not ipvsproxy's, its chains that are not ipvsproxy's, its rules in
// ipvsproxy's chains that name those chains or its sets, its sets that are
// not ipvsproxy's. Everything of ipvsproxy's, and everything else, stays, so it
// is safe before every start of the daemon (the init container runs it on
// every pod start; the second run finds nothing). It returns what it
// removed, and goes on past failures.
//
// nft holds kube-proxy's nftables-mode tables, `ip kube-proxy` and `ip6
// kube-proxy`, deleted whole (kube-proxy's own clean-up does the same);
// nil skips them.
func KubeProxyLeftovers(k adapters.Kernel, nft nftables.Interface, families []v1.IPFamily) ([]string, error) {
	var removed []string
	var errs []error
	fail := func(err error) {
		klog.ErrorS(err, "Removing kube-proxy's leftovers failed")
		errs = append(errs, err)
	}
	ours := map[string]bool{}
	for _, j := range owned.JumpRules() {
		ours[jumpKey(j.Table, j.Chain, j.Rule)] = true
	}
	for _, family := range families {
		ipt := k.IPTables[family]
		if ipt == nil {
			continue
		}
		for _, table := range []iptables.Table{iptables.TableNAT, iptables.TableFilter, iptables.TableMangle} {
			save, err := ipt.Save(table)
			if err != nil {
				fail(fmt.Errorf("read %s %s table: %w", family, table, err))
				continue
			}
			present := iptables.SavedRules(save)
			for _, j := range kubeProxyJumps() {
				if j.table != table || ours[jumpKey(j.table, j.chain, j.rule)] || !hasJump(present[j.chain], j.rule) {
					continue
				}
				if err := ipt.DeleteRule(j.table, j.chain, j.rule...); err != nil {
					fail(fmt.Errorf("delete kube-proxy's %s jump from %s %s to %s: %w", family, j.table, j.chain, j.rule[len(j.rule)-1], err))
					continue
				}
				removed = append(removed, fmt.Sprintf("%s %s jump %s -> %s", family, table, j.chain, j.rule[len(j.rule)-1]))
			}
			var chains []string
			for name := range present {
				if isKubeProxyChain(table, name) {
					chains = append(chains, name)
				}
			}
			slices.Sort(chains)
			// kube-proxy fills chains of ipvsproxy's names (its nat
			// KUBE-SERVICES jumps to every KUBE-SVC-*, its filter
			// KUBE-IPVS-FILTER and nat KUBE-NODE-PORT match its
			// *-LOCAL sets): those rules go one by one, or the chains
			// and sets they name could not be deleted. ipvsproxy's own
			// rules never name a chain or set of kube-proxy's alone, so
			// they stay; the daemon's first sync rewrites these chains
			// whole anyway.
			theirs := map[string]bool{}
			for _, c := range chains {
				theirs[c] = true
			}
			for _, name := range kubeProxyOnlySets {
				theirs[name] = true
			}
			var deletes []string
			var shared []string
			for _, c := range owned.Chains[table] {
				n := 0
				for _, line := range present[c] {
					if referencesAny(line, theirs) {
						deletes = append(deletes, "-D"+strings.TrimPrefix(line, "-A"))
						n++
					}
				}
				if n > 0 {
					shared = append(shared, fmt.Sprintf("%s %s %d kube-proxy rules in %s", family, table, n, c))
				}
			}
			if len(chains) == 0 && len(deletes) == 0 {
				continue
			}
			// Flush first: the chains jump to one another.
			var text strings.Builder
			text.WriteString("*" + string(table) + "\n")
			for _, c := range chains {
				fmt.Fprintf(&text, ":%s - [0:0]\n", c)
			}
			for _, d := range deletes {
				text.WriteString(d + "\n")
			}
			for _, c := range chains {
				fmt.Fprintf(&text, "-X %s\n", c)
			}
			text.WriteString("COMMIT\n")
			if err := ipt.Restore([]byte(text.String())); err != nil {
				fail(fmt.Errorf("delete kube-proxy's %s %s rules and chains %s: %w", family, table, strings.Join(chains, ", "), err))
				continue
			}
			removed = append(removed, shared...)
			for _, c := range chains {
				removed = append(removed, fmt.Sprintf("%s %s chain %s", family, table, c))
			}
		}
	}

	// Sets last: one that a rule still references cannot be destroyed.
	sets, err := k.IPSet.Sets()
	if err != nil && !errors.Is(err, ipset.ErrUnsupported) {
		fail(fmt.Errorf("list ipsets: %w", err))
	}
	theirs := map[string]bool{}
	for _, name := range kubeProxyOnlySets {
		theirs[name] = true
	}
	for _, s := range sets {
		if !theirs[s.Name] {
			continue
		}
		if err := k.IPSet.DestroySet(s.Name); err != nil && !errors.Is(err, ipset.ErrNotFound) {
			fail(fmt.Errorf("destroy kube-proxy's ipset %s: %w", s.Name, err))
			continue
		}
		removed = append(removed, "ipset "+s.Name)
	}

	if nft != nil {
		for _, family := range []nftables.Family{nftables.IPv4, nftables.IPv6} {
			err := nft.DeleteTable(family, kubeProxyNFTablesTable)
			switch {
			case errors.Is(err, nftables.ErrNotFound), errors.Is(err, nftables.ErrUnsupported):
			case err != nil:
				fail(fmt.Errorf("delete kube-proxy's nftables table: %w", err))
			default:
				removed = append(removed, fmt.Sprintf("nftables table %s %s", family, kubeProxyNFTablesTable))
			}
		}
	}
	return removed, errors.Join(errs...)
}

// isKubeProxyChain reports whether name in table is kube-proxy's and not
// ipvsproxy's.
func isKubeProxyChain(table iptables.Table, name string) bool {
	for _, c := range owned.Chains[table] {
		if c == name {
			return false
		}
	}
	for _, c := range kubeProxyChains[table] {
		if c == name {
			return true
		}
	}
	if table == iptables.TableNAT {
		for _, p := range kubeProxyChainPrefixes {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
	}
	return false
}

func jumpKey(table iptables.Table, chain string, rule []string) string {
	return string(table) + " " + chain + " " + strings.Join(rule, " ")
}

// hasJump reports whether the saved rules of a chain hold a jump like
// rule: its target and its comment (iptables-save may order the matches
// differently; DeleteRule then removes the exact rule).
func hasJump(saved []string, rule []string) bool {
	target, comment := rule[len(rule)-1], rule[len(rule)-3]
	for _, r := range saved {
		if strings.HasSuffix(r, " -j "+target) && strings.Contains(r, comment) {
			return true
		}
	}
	return false
}
