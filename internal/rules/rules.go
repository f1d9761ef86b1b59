package rules

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
)

// IPTables is the iptables-restore input for one family; local is the
// family's local-traffic detector. Rules are written in iptables-save's
// canonical form so that what Save returns can be compared with it to skip
// writes that would change nothing.
func IPTables(cfg ipvsproxy.Config, family v1.IPFamily, local ipvsproxy.LocalDetector) string {
	set := func(base string) string { return owned.SetName(base, family) }
	mark := fmt.Sprintf("%#x", cfg.MasqueradeMark)
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }

	w("*nat")
	for _, c := range owned.Chains[iptables.TableNAT] {
		w(":%s - [0:0]", c)
	}
	switch {
	case cfg.MasqueradeAll:
		w("-A %s -m set --match-set %s dst,dst -j %s", owned.ChainServices, set(owned.SetClusterIP), owned.ChainMarkMasq)
	case local.Implemented():
		// Pods keep their source address to cluster IPs; anything else (the
		// node itself, hostNetwork pods) is masqueraded so replies return
		// through this node.
		w("-A %s %s-m set --match-set %s dst,dst -j %s", owned.ChainServices, ruleMatch(local.IfNotLocal), set(owned.SetClusterIP), owned.ChainMarkMasq)
	default:
		// No way to tell pods apart: kube-proxy's fallback masquerades what
		// the node sends from a service address (the kernel picks the
		// destination itself as source for a local address) to a service
		// port, so the node and hostNetwork pods still reach endpoints on
		// other nodes.
		w("-A %s -m set --match-set %s src,dst -j %s", owned.ChainServices, set(owned.SetClusterIP), owned.ChainMarkMasq)
	}
	// ACCEPT, not RETURN (kube-proxy's acceptIPVSTraffic): a later
	// --dst-type LOCAL DNAT of the host's (DOCKER, CNI-HOSTPORT-DNAT) must
	// not take service traffic from IPVS.
	w("-A %s -m set --match-set %s dst,dst -j ACCEPT", owned.ChainServices, set(owned.SetClusterIP))
	w("-A %s -m set --match-set %s dst,dst -j %s", owned.ChainServices, set(owned.SetExternalIP), owned.ChainMarkMasq)
	w("-A %s -m set --match-set %s dst,dst -j %s", owned.ChainServices, set(owned.SetLoadBalancer), owned.ChainMarkMasq)
	// Local policy without a local endpoint sends in-cluster sources to
	// other nodes' endpoints: masquerade so the reply comes back here.
	w("-A %s -m set --match-set %s dst,dst -j %s", owned.ChainServices, set(owned.SetLocalNoEndpoints), owned.ChainMarkMasq)
	w("-A %s -m set --match-set %s dst,dst -j ACCEPT", owned.ChainServices, set(owned.SetIPVSServices))
	w("-A %s -m addrtype --dst-type LOCAL -j %s", owned.ChainServices, owned.ChainNodePort)
	w("-A %s -m set --match-set %s dst,dst -j ACCEPT", owned.ChainServices, set(owned.SetNodePorts))
	w("-A %s -p tcp -m set --match-set %s dst -j %s", owned.ChainNodePort, set(owned.SetNodePortTCP), owned.ChainMarkMasq)
	w("-A %s -p udp -m set --match-set %s dst -j %s", owned.ChainNodePort, set(owned.SetNodePortUDP), owned.ChainMarkMasq)
	w("-A %s -p sctp -m set --match-set %s dst,dst -j %s", owned.ChainNodePort, set(owned.SetNodePortSCTP), owned.ChainMarkMasq)
	w("-A %s -j MARK --set-xmark %s/%s", owned.ChainMarkMasq, mark, mark)
	w("-A %s -m set --match-set %s dst,dst,src -j MASQUERADE", owned.ChainPostrouting, set(owned.SetLoopBack))
	w("-A %s -m mark ! --mark %s/%s -j RETURN", owned.ChainPostrouting, mark, mark)
	// Clear the bit (an xor, as iptables-save prints it) so a packet that is
	// processed again is not masqueraded twice.
	w("-A %s -j MARK --set-xmark %s/0x0", owned.ChainPostrouting, mark)
	w("-A %s -j MASQUERADE --random-fully", owned.ChainPostrouting)
	w("COMMIT")

	// filter INPUT runs before IPVS takes a packet (LOCAL_IN priority 98):
	// what is dropped here never reaches a virtual server, and what is
	// accepted here is safe from a host firewall's later REJECT or DROP.
	w("*filter")
	for _, c := range owned.Chains[iptables.TableFilter] {
		w(":%s - [0:0]", c)
	}
	w("-A %s -m set --match-set %s dst,dst -m set ! --match-set %s dst,dst,src -j DROP", owned.ChainIPVSFilter, set(owned.SetLBFirewall), set(owned.SetLBSourceCIDR))
	// Silently: no reply, no RST, no ICMP. Without a detector nothing is
	// known to be in-cluster; the node's own traffic is taken by IPVS at
	// LOCAL_OUT and never comes here.
	w("-A %s %s-m set --match-set %s dst,dst -j DROP", owned.ChainIPVSFilter, ruleMatch(local.IfNotLocal), set(owned.SetLocalNoEndpoints))
	// Traffic to a virtual server goes back to INPUT, where the host's own
	// rules decide (kube-proxy's RETURN): a host firewall may restrict the
	// node ports and addresses tenants open. --accept-service-traffic
	// accepts it here instead, ahead of any rule of the host's.
	w("-A %s -m set --match-set %s dst,dst -j %s", owned.ChainIPVSFilter, set(owned.SetIPVSServices), serviceVerdict(cfg))
	w("-A %s -m set --match-set %s dst,dst -j %s", owned.ChainIPVSFilter, set(owned.SetNodePorts), serviceVerdict(cfg))
	// Load balancer probes to LB-IP:healthCheckNodePort (kubernetes#117723),
	// accepted whatever the host's rules, as kube-proxy's KUBE-NODE-PORT
	// filter chain does: a load balancer must see a node's answer.
	w("-A %s -p tcp -m set --match-set %s dst -j ACCEPT", owned.ChainIPVSFilter, set(owned.SetHealthCheckPorts))
	// A host port listening on 0.0.0.0 must not answer on service
	// addresses (kubernetes#72236). Every virtual server, Local policy
	// included, left the chain above (kubespray#10572).
	reject := "icmp-port-unreachable"
	if family == v1.IPv6Protocol {
		reject = "icmp6-port-unreachable"
	}
	w("-A %s -m conntrack --ctstate NEW -m set --match-set %s dst -j REJECT --reject-with %s", owned.ChainIPVSFilter, set(owned.SetIPVSIPs), reject)
	// The same for every address of a routed Service CIDR, used or not:
	// the route makes them all local.
	w("-A %s -m conntrack --ctstate NEW -m set --match-set %s dst -j REJECT --reject-with %s", owned.ChainIPVSFilter, set(owned.SetServiceCIDRs), reject)
	w("-A %s -m mark --mark %s/%s -j ACCEPT", owned.ChainForward, mark, mark)
	w("-A %s -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT", owned.ChainForward)
	w("COMMIT")

	w("*mangle")
	for _, c := range owned.Chains[iptables.TableMangle] {
		w(":%s - [0:0]", c)
	}
	// The node's own traffic to a source-ranged LB IP: allowed only when
	// one of the node's addresses is in range (kubernetes#119656).
	w("-A %s -m set --match-set %s dst,dst -j DROP", owned.ChainIPVSOutFilter, set(owned.SetLBNoNodeAccess))
	w("COMMIT")
	return b.String()
}

// serviceVerdict is what KUBE-IPVS-FILTER does with traffic to a virtual
// server: RETURN to the host's INPUT rules, or ACCEPT ahead of them with
// --accept-service-traffic.
func serviceVerdict(cfg ipvsproxy.Config) string {
	if cfg.AcceptServiceTraffic {
		return "ACCEPT"
	}
	return "RETURN"
}

// ruleMatch is a detector's arguments as IPTables writes them:
// where iptables-save prints them (-s and -i come before any -m).
func ruleMatch(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return strings.Join(args, " ") + " "
}

// TableText cuts one table's block ("*nat" ... "COMMIT") out of the text
// IPTables returns: iptables-restore commits table by table, so each is
// written (and compared) on its own.
func TableText(text string, table iptables.Table) string {
	start := strings.Index(text, "*"+string(table)+"\n")
	if start < 0 {
		return ""
	}
	end := strings.Index(text[start:], "COMMIT\n")
	return text[start : start+end+len("COMMIT\n")]
}

// match reports whether the owned chains in save hold exactly the rules
// of want (one table's text), so the restore can be skipped.
func match(save []byte, want string, table iptables.Table) bool {
	return SavedMatch(iptables.SavedRules(save), want, table)
}

// SavedMatch is match on a save already split by iptables.SavedRules.
func SavedMatch(have map[string][]string, want string, table iptables.Table) bool {
	wanted := iptables.SavedRules([]byte(want))
	for _, c := range owned.Chains[table] {
		h, ok := have[c]
		if !ok || !slices.Equal(h, wanted[c]) {
			return false
		}
	}
	return true
}
