package cleanup

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	v1 "k8s.io/api/core/v1"
)

// scopeRow is what each clean-up removes of one kind of kernel object, in
// the operator's words. The names in it come from the lists the clean-ups
// act on (internal/owned for ipvsproxy's, kubeproxy.go for kube-proxy's),
// so the statement cannot name what the code does not remove; the table
// "What each clean-up removes" of docs/migrate-from-kube-proxy.md is this,
// rendered (TestScopeTableInMigrationGuide).
type scopeRow struct {
	object             string
	installed          string // Installed: `ipvsproxy cleanup`
	afterKubeProxyIPVS string // AfterKubeProxyIPVS: --after-kube-proxy-ipvs
	kubeProxyLeftovers string // KubeProxyLeftovers: --kube-proxy-leftovers
	kubeProxyCleanup   string // kube-proxy's own, for comparison
}

// scopeColumns are the table's header cells.
var scopeColumns = []string{"", "`ipvsproxy cleanup`", "`ipvsproxy cleanup --after-kube-proxy-ipvs`", "`ipvsproxy cleanup --kube-proxy-leftovers`", "`kube-proxy --cleanup`"}

func scope() []scopeRow {
	ownSets := setNames(func(string) bool { return true })
	aloneSets := setNames(func(name string) bool { return oursAloneSets([]v1.IPFamily{v1.IPv4Protocol})[name] })
	theirSets := code(slices.DeleteFunc(slices.Clone(kubeProxyOnlySets), func(n string) bool { return strings.HasPrefix(n, "KUBE-6-") })...)
	var ownChains, theirChains []string
	for _, table := range owned.Tables {
		if c := owned.Chains[table]; len(c) > 0 {
			ownChains = append(ownChains, fmt.Sprintf("%s %s", table, code(c...)))
		}
		var theirs []string
		for _, c := range kubeProxyChains[table] {
			if isKubeProxyChain(table, c) {
				theirs = append(theirs, c)
			}
		}
		if table == iptables.TableNAT {
			for _, p := range kubeProxyChainPrefixes {
				theirs = append(theirs, p+"*")
			}
		}
		if len(theirs) > 0 {
			theirChains = append(theirChains, fmt.Sprintf("%s %s", table, code(theirs...)))
		}
	}
	var ownJumps []string
	for _, j := range owned.JumpRules() {
		ownJumps = append(ownJumps, fmt.Sprintf("%s `%s` → `%s`", j.Table, j.Chain, j.Rule[len(j.Rule)-1]))
	}
	var sharedChains []string
	for _, table := range []iptables.Table{iptables.TableNAT, iptables.TableFilter} {
		sharedChains = append(sharedChains, fmt.Sprintf("%s %s", table, code(owned.Chains[table]...)))
	}
	outFilter := fmt.Sprintf("mangle `%s` and its `OUTPUT` jump", owned.ChainIPVSOutFilter)
	link := "`" + owned.DummyInterface + "`"
	record := "`" + owned.SetOwned + "`"

	return []scopeRow{{
		object: "IPVS virtual servers",
		installed: "Only those ipvsproxy recorded as its own in " + record + ", whether on a bound address, inside one of its Service CIDR routes or on a node address. " +
			"Anything else (another load balancer's IPVS services, kube-proxy's, `--ipvs-exclude-cidrs`) stays; so does everything when the record is missing.",
		afterKubeProxyIPVS: "None: kube-proxy's IPVS mode has adopted them.",
		kubeProxyLeftovers: "None: ipvsproxy adopts kube-proxy's IPVS-mode virtual servers and rewrites them.",
		kubeProxyCleanup:   "**All of them** (`ipvs.Flush()`), whoever created them.",
	}, {
		object: "Dummy link and routes",
		installed: link + ", and its `local` routes of the Service CIDRs (`proto 233`). " +
			"Without a set only ipvsproxy makes on the node (" + aloneSets + ": a node handed back to kube-proxy's IPVS mode, or one ipvsproxy never ran on), " +
			link + " is kube-proxy's and stays, as do the sets and chains of the names the two share; only the routes and " + outFilter + " go.",
		afterKubeProxyIPVS: "The `local` routes of the Service CIDRs on " + link + " (`proto 233`); " + link + " stays, kube-proxy's now.",
		kubeProxyLeftovers: "None (" + link + " is ipvsproxy's too).",
		kubeProxyCleanup:   link,
	}, {
		object: "ipsets (each also as its IPv6 `KUBE-6-` twin)",
		installed: ownSets + ", destroyed after the rules that name them; the ownership record " + record + " last, and only when every other step succeeded, " +
			"so a failed run can be repeated. Without a set only ipvsproxy makes on the node, none: the names are kube-proxy's too.",
		afterKubeProxyIPVS: "The sets only ipvsproxy makes: " + aloneSets + ", the record last. The sets of names kube-proxy uses stay.",
		kubeProxyLeftovers: "kube-proxy's IPVS-mode sets that ipvsproxy does not use: " + theirSets + ", destroyed after kube-proxy's rules that match them. " +
			"The sets of names ipvsproxy uses stay: they tell its first sync to adopt kube-proxy's virtual servers.",
		kubeProxyCleanup: "The sets of kube-proxy's IPVS mode, including the names ipvsproxy uses.",
	}, {
		object: "iptables chains and jumps (both families)",
		installed: "ipvsproxy's chains, " + strings.Join(ownChains, "; ") + ", and its jumps: " + strings.Join(ownJumps, ", ") + ". " +
			"Without a set only ipvsproxy makes, only " + outFilter + ": the nat and filter names are kube-proxy's too.",
		afterKubeProxyIPVS: outFilter + ", which kube-proxy does not know. It refuses, changing nothing, while a rule of ipvsproxy's still names one of its own sets in " +
			strings.Join(sharedChains, "; ") + ": kube-proxy has not synced yet.",
		kubeProxyLeftovers: "kube-proxy's chains that are not ipvsproxy's, " + strings.Join(theirChains, "; ") + ", with their jumps; " +
			"kube-proxy's rules in a chain of ipvsproxy's name that jump to those chains or match those sets, one by one; its other rules there stay until ipvsproxy's first sync rewrites the chain. " +
			"kubelet's `KUBE-FIREWALL` and anyone else's stay.",
		kubeProxyCleanup: "The iptables-mode and IPVS-mode chains with their jumps.",
	}, {
		object:             "nftables",
		installed:          "None.",
		afterKubeProxyIPVS: "None.",
		kubeProxyLeftovers: "The `" + kubeProxyNFTablesTable + "` tables (ip and ip6) of its nftables mode, whole. Any other table stays.",
		kubeProxyCleanup:   "The `" + kubeProxyNFTablesTable + "` tables (ip and ip6) of its nftables mode.",
	}, {
		object:             "Conntrack, sysctls, modules",
		installed:          "Left as they are.",
		afterKubeProxyIPVS: "Left as they are.",
		kubeProxyLeftovers: "Left as they are.",
		kubeProxyCleanup:   "Left as they are.",
	}}
}

// scopeTable renders scope as a Markdown table.
func scopeTable() string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(scopeColumns, " | ") + " |\n|" + strings.Repeat("---|", len(scopeColumns)) + "\n")
	for _, r := range scope() {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.object, r.installed, r.afterKubeProxyIPVS, r.kubeProxyLeftovers, r.kubeProxyCleanup)
	}
	return b.String()
}

// setNames is the IPv4 names of ipvsproxy's sets that keep, in backticks.
func setNames(keep func(string) bool) string {
	var names []string
	for _, s := range owned.Sets([]v1.IPFamily{v1.IPv4Protocol}, 0) {
		if keep(s.Name) {
			names = append(names, s.Name)
		}
	}
	return code(names...)
}

// code is names as a list of Markdown code spans.
func code(names ...string) string {
	return "`" + strings.Join(names, "`, `") + "`"
}
