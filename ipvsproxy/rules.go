package ipvsproxy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/iptables"
	v1 "k8s.io/api/core/v1"
)

// The chains the proxier owns. Their content depends only on the
// configuration: which traffic is marked is decided by ipset membership, so
// Service changes never rewrite iptables.
const (
	chainServices    = "KUBE-SERVICES"    // nat: mark Cluster-policy service traffic
	chainNodePort    = "KUBE-NODE-PORT"   // nat: mark Cluster-policy node port traffic
	chainMarkMasq    = "KUBE-MARK-MASQ"   // nat: set the masquerade bit
	chainPostrouting = "KUBE-POSTROUTING" // nat: masquerade marked and hairpin traffic
	chainIPVSFilter  = "KUBE-IPVS-FILTER" // filter: source ranges; no host ports on service IPs
	chainForward     = "KUBE-FORWARD"     // filter: let IPVS replies through a DROP policy
)

// jumpRule is a rule the proxier adds to a built-in chain.
type jumpRule struct {
	table iptables.Table
	chain string
	rule  []string
}

func jumpRules() []jumpRule {
	j := func(table iptables.Table, chain, target, comment string) jumpRule {
		return jumpRule{table, chain, []string{"-m", "comment", "--comment", comment, "-j", target}}
	}
	return []jumpRule{
		j(iptables.TableNAT, "PREROUTING", chainServices, "kubernetes service portals"),
		j(iptables.TableNAT, "OUTPUT", chainServices, "kubernetes service portals"),
		j(iptables.TableNAT, "POSTROUTING", chainPostrouting, "kubernetes postrouting rules"),
		j(iptables.TableFilter, "INPUT", chainIPVSFilter, "kubernetes ipvs access filter"),
		j(iptables.TableFilter, "FORWARD", chainForward, "kubernetes forwarding rules"),
	}
}

// ownedChains lists the chains per table, in the order they are declared.
var ownedChains = map[iptables.Table][]string{
	iptables.TableNAT:    {chainServices, chainNodePort, chainMarkMasq, chainPostrouting},
	iptables.TableFilter: {chainIPVSFilter, chainForward},
}

// iptablesRules is the iptables-restore input for one family. Rules are
// written in iptables-save's canonical form so that what Save returns can be
// compared with it to skip writes that would change nothing.
func iptablesRules(cfg Config, family v1.IPFamily) string {
	set := func(base string) string { return setName(base, family) }
	mark := fmt.Sprintf("%#x", cfg.MasqueradeMark)
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }

	w("*nat")
	for _, c := range ownedChains[iptables.TableNAT] {
		w(":%s - [0:0]", c)
	}
	if cfg.MasqueradeAll {
		w("-A %s -m set --match-set %s dst,dst -j %s", chainServices, set(setClusterIP), chainMarkMasq)
	} else if cidr, ok := firstCIDR(cfg, family); ok {
		// Pods keep their source address to cluster IPs; anything from
		// outside the pod network (the node itself, hostNetwork pods) is
		// masqueraded so replies return through this node.
		w("-A %s ! -s %s -m set --match-set %s dst,dst -j %s", chainServices, cidr, set(setClusterIP), chainMarkMasq)
	}
	w("-A %s -m set --match-set %s dst,dst -j RETURN", chainServices, set(setClusterIP))
	w("-A %s -m set --match-set %s dst,dst -j %s", chainServices, set(setExternalIP), chainMarkMasq)
	w("-A %s -m set --match-set %s dst,dst -j %s", chainServices, set(setLoadBalancer), chainMarkMasq)
	w("-A %s -m set --match-set %s dst,dst -j RETURN", chainServices, set(setIPVSServices))
	w("-A %s -m addrtype --dst-type LOCAL -j %s", chainServices, chainNodePort)
	w("-A %s -p tcp -m set --match-set %s dst -j %s", chainNodePort, set(setNodePortTCP), chainMarkMasq)
	w("-A %s -p udp -m set --match-set %s dst -j %s", chainNodePort, set(setNodePortUDP), chainMarkMasq)
	w("-A %s -p sctp -m set --match-set %s dst,dst -j %s", chainNodePort, set(setNodePortSCTP), chainMarkMasq)
	w("-A %s -j MARK --set-xmark %s/%s", chainMarkMasq, mark, mark)
	w("-A %s -m set --match-set %s dst,dst,src -j MASQUERADE", chainPostrouting, set(setLoopBack))
	w("-A %s -m mark ! --mark %s/%s -j RETURN", chainPostrouting, mark, mark)
	// Clear the bit (an xor, as iptables-save prints it) so a packet that is
	// processed again is not masqueraded twice.
	w("-A %s -j MARK --set-xmark %s/0x0", chainPostrouting, mark)
	w("-A %s -j MASQUERADE --random-fully", chainPostrouting)
	w("COMMIT")

	w("*filter")
	for _, c := range ownedChains[iptables.TableFilter] {
		w(":%s - [0:0]", c)
	}
	w("-A %s -m set --match-set %s dst,dst -m set ! --match-set %s dst,dst,src -j DROP", chainIPVSFilter, set(setLBFirewall), set(setLBSourceCIDR))
	w("-A %s -m set --match-set %s dst,dst -j RETURN", chainIPVSFilter, set(setIPVSServices))
	// A host port listening on 0.0.0.0 must not answer on service
	// addresses (kubernetes#72236). Every virtual server, Local policy
	// included, returned above (kubespray#10572).
	reject := "icmp-port-unreachable"
	if family == v1.IPv6Protocol {
		reject = "icmp6-port-unreachable"
	}
	w("-A %s -m conntrack --ctstate NEW -m set --match-set %s dst -j REJECT --reject-with %s", chainIPVSFilter, set(setIPVSIPs), reject)
	// The same for every address of a routed Service CIDR, used or not:
	// the route makes them all local.
	w("-A %s -m conntrack --ctstate NEW -m set --match-set %s dst -j REJECT --reject-with %s", chainIPVSFilter, set(setServiceCIDRs), reject)
	w("-A %s -m mark --mark %s/%s -j ACCEPT", chainForward, mark, mark)
	w("-A %s -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT", chainForward)
	w("COMMIT")
	return b.String()
}

// firstCIDR is the first cluster CIDR of family: like kube-proxy, one pod
// range per family decides masquerading.
func firstCIDR(cfg Config, family v1.IPFamily) (string, bool) {
	for _, p := range cfg.ClusterCIDRs {
		if p.Addr().Is4() == (family == v1.IPv4Protocol) {
			return p.Masked().String(), true
		}
	}
	return "", false
}

// tableText cuts one table's block ("*nat" ... "COMMIT") out of the text
// iptablesRules returns: iptables-restore commits table by table, so each is
// written (and compared) on its own.
func tableText(text string, table iptables.Table) string {
	start := strings.Index(text, "*"+string(table)+"\n")
	if start < 0 {
		return ""
	}
	end := strings.Index(text[start:], "COMMIT\n")
	return text[start : start+end+len("COMMIT\n")]
}

// rulesMatch reports whether the owned chains in save hold exactly the rules
// of want (one table's text), so the restore can be skipped.
func rulesMatch(save []byte, want string, table iptables.Table) bool {
	have, wanted := iptables.SavedRules(save), iptables.SavedRules([]byte(want))
	for _, c := range ownedChains[table] {
		h, ok := have[c]
		if !ok || !slices.Equal(h, wanted[c]) {
			return false
		}
	}
	return true
}
