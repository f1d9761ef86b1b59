package ipvsproxy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/iptables"
	v1 "k8s.io/api/core/v1"
)

// The chains the proxier owns. Their content depends only on the
// configuration (and, with --detect-local-mode NodeCIDR, on this Node's pod
// CIDR): which traffic is marked, dropped or accepted is decided by ipset
// membership, so Service changes never rewrite iptables.
const (
	chainServices    = "KUBE-SERVICES"    // nat: mark service traffic for masquerade, accept it
	chainNodePort    = "KUBE-NODE-PORT"   // nat: mark Cluster-policy node port traffic
	chainMarkMasq    = "KUBE-MARK-MASQ"   // nat: set the masquerade bit
	chainPostrouting = "KUBE-POSTROUTING" // nat: masquerade marked and hairpin traffic
	chainIPVSFilter  = "KUBE-IPVS-FILTER" // filter: source ranges, Local without local endpoints, accept service traffic, no host ports on service IPs
	chainForward     = "KUBE-FORWARD"     // filter: let IPVS replies through a DROP policy
	// mangle: source ranges for the node's own traffic. Not filter OUTPUT
	// as in kube-proxy: IPVS takes locally sent packets at LOCAL_OUT
	// priority -98, before filter OUTPUT (0), which then sees the real
	// server as destination; mangle OUTPUT (-150) still sees the LB IP.
	chainIPVSOutFilter = "KUBE-IPVS-OUT-FILTER"
)

// jumpRule is a rule the proxier adds to a built-in chain.
type jumpRule struct {
	table iptables.Table
	chain string
	rule  []string
}

// jumpRules are inserted first in their built-in chains, as kube-proxy does,
// so that a host firewall's earlier rules (a trailing REJECT, Docker's
// DOCKER or CNI portmap's CNI-HOSTPORT-DNAT, which match --dst-type LOCAL
// and so every service address) do not decide service traffic first.
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
		j(iptables.TableMangle, "OUTPUT", chainIPVSOutFilter, "kubernetes ipvs access filter"),
	}
}

// ownedTables are the tables holding owned chains, in the order they are
// restored.
var ownedTables = []iptables.Table{iptables.TableNAT, iptables.TableFilter, iptables.TableMangle}

// ownedChains lists the chains per table, in the order they are declared.
var ownedChains = map[iptables.Table][]string{
	iptables.TableNAT:    {chainServices, chainNodePort, chainMarkMasq, chainPostrouting},
	iptables.TableFilter: {chainIPVSFilter, chainForward},
	iptables.TableMangle: {chainIPVSOutFilter},
}

// iptablesRules is the iptables-restore input for one family; local is the
// family's local-traffic detector. Rules are written in iptables-save's
// canonical form so that what Save returns can be compared with it to skip
// writes that would change nothing.
func iptablesRules(cfg Config, family v1.IPFamily, local localDetector) string {
	set := func(base string) string { return setName(base, family) }
	mark := fmt.Sprintf("%#x", cfg.MasqueradeMark)
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }

	w("*nat")
	for _, c := range ownedChains[iptables.TableNAT] {
		w(":%s - [0:0]", c)
	}
	switch {
	case cfg.MasqueradeAll:
		w("-A %s -m set --match-set %s dst,dst -j %s", chainServices, set(setClusterIP), chainMarkMasq)
	case local.implemented():
		// Pods keep their source address to cluster IPs; anything else (the
		// node itself, hostNetwork pods) is masqueraded so replies return
		// through this node.
		w("-A %s %s-m set --match-set %s dst,dst -j %s", chainServices, ruleMatch(local.ifNotLocal), set(setClusterIP), chainMarkMasq)
	default:
		// No way to tell pods apart: kube-proxy's fallback masquerades what
		// the node sends from a service address (the kernel picks the
		// destination itself as source for a local address) to a service
		// port, so the node and hostNetwork pods still reach endpoints on
		// other nodes.
		w("-A %s -m set --match-set %s src,dst -j %s", chainServices, set(setClusterIP), chainMarkMasq)
	}
	// ACCEPT, not RETURN (kube-proxy's acceptIPVSTraffic): a later
	// --dst-type LOCAL DNAT of the host's (DOCKER, CNI-HOSTPORT-DNAT) must
	// not take service traffic from IPVS.
	w("-A %s -m set --match-set %s dst,dst -j ACCEPT", chainServices, set(setClusterIP))
	w("-A %s -m set --match-set %s dst,dst -j %s", chainServices, set(setExternalIP), chainMarkMasq)
	w("-A %s -m set --match-set %s dst,dst -j %s", chainServices, set(setLoadBalancer), chainMarkMasq)
	// Local policy without a local endpoint sends in-cluster sources to
	// other nodes' endpoints: masquerade so the reply comes back here.
	w("-A %s -m set --match-set %s dst,dst -j %s", chainServices, set(setLocalNoEndpoints), chainMarkMasq)
	w("-A %s -m set --match-set %s dst,dst -j ACCEPT", chainServices, set(setIPVSServices))
	w("-A %s -m addrtype --dst-type LOCAL -j %s", chainServices, chainNodePort)
	w("-A %s -m set --match-set %s dst,dst -j ACCEPT", chainServices, set(setNodePorts))
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

	// filter INPUT runs before IPVS takes a packet (LOCAL_IN priority 98):
	// what is dropped here never reaches a virtual server, and what is
	// accepted here is safe from a host firewall's later REJECT or DROP.
	w("*filter")
	for _, c := range ownedChains[iptables.TableFilter] {
		w(":%s - [0:0]", c)
	}
	w("-A %s -m set --match-set %s dst,dst -m set ! --match-set %s dst,dst,src -j DROP", chainIPVSFilter, set(setLBFirewall), set(setLBSourceCIDR))
	// Silently: no reply, no RST, no ICMP. Without a detector nothing is
	// known to be in-cluster; the node's own traffic is taken by IPVS at
	// LOCAL_OUT and never comes here.
	w("-A %s %s-m set --match-set %s dst,dst -j DROP", chainIPVSFilter, ruleMatch(local.ifNotLocal), set(setLocalNoEndpoints))
	w("-A %s -m set --match-set %s dst,dst -j ACCEPT", chainIPVSFilter, set(setIPVSServices))
	w("-A %s -m set --match-set %s dst,dst -j ACCEPT", chainIPVSFilter, set(setNodePorts))
	// Load balancer probes to LB-IP:healthCheckNodePort (kubernetes#117723).
	w("-A %s -p tcp -m set --match-set %s dst -j ACCEPT", chainIPVSFilter, set(setHealthCheckPorts))
	// A host port listening on 0.0.0.0 must not answer on service
	// addresses (kubernetes#72236). Every virtual server, Local policy
	// included, was accepted above (kubespray#10572).
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

	w("*mangle")
	for _, c := range ownedChains[iptables.TableMangle] {
		w(":%s - [0:0]", c)
	}
	// The node's own traffic to a source-ranged LB IP: allowed only when
	// one of the node's addresses is in range (kubernetes#119656).
	w("-A %s -m set --match-set %s dst,dst -j DROP", chainIPVSOutFilter, set(setLBNoNodeAccess))
	w("COMMIT")
	return b.String()
}

// ruleMatch is a detector's arguments as iptablesRules writes them:
// where iptables-save prints them (-s and -i come before any -m).
func ruleMatch(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return strings.Join(args, " ") + " "
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
	return savedMatch(iptables.SavedRules(save), want, table)
}

// savedMatch is rulesMatch on a save already split by iptables.SavedRules.
func savedMatch(have map[string][]string, want string, table iptables.Table) bool {
	wanted := iptables.SavedRules([]byte(want))
	for _, c := range ownedChains[table] {
		h, ok := have[c]
		if !ok || !slices.Equal(h, wanted[c]) {
			return false
		}
	}
	return true
}
