package owned

import (
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
)

// The chains the proxier owns. Their content depends only on the
// configuration (and, with --detect-local-mode NodeCIDR, on this Node's pod
// CIDR): which traffic is marked, dropped or accepted is decided by ipset
// membership, so Service changes never rewrite iptables.
const (
	ChainServices    = "KUBE-SERVICES"    // nat: mark service traffic for masquerade, accept it
	ChainNodePort    = "KUBE-NODE-PORT"   // nat: mark Cluster-policy node port traffic
	ChainMarkMasq    = "KUBE-MARK-MASQ"   // nat: set the masquerade bit
	ChainPostrouting = "KUBE-POSTROUTING" // nat: masquerade marked and hairpin traffic
	ChainIPVSFilter  = "KUBE-IPVS-FILTER" // filter: source ranges, Local without local endpoints, accept service traffic, no host ports on service IPs
	ChainForward     = "KUBE-FORWARD"     // filter: let IPVS replies through a DROP policy
	// mangle: source ranges for the node's own traffic. Not filter OUTPUT
	// as in kube-proxy: IPVS takes locally sent packets at LOCAL_OUT
	// priority -98, before filter OUTPUT (0), which then sees the real
	// server as destination; mangle OUTPUT (-150) still sees the LB IP.
	ChainIPVSOutFilter = "KUBE-IPVS-OUT-FILTER"
)

// JumpRule is a rule the proxier adds to a built-in chain.
type JumpRule struct {
	Table iptables.Table
	Chain string
	Rule  []string
}

// JumpRules are inserted first in their built-in chains, as kube-proxy does,
// so that a host firewall's earlier rules (a trailing REJECT, Docker's
// DOCKER or CNI portmap's CNI-HOSTPORT-DNAT, which match --dst-type LOCAL
// and so every service address) do not decide service traffic first.
func JumpRules() []JumpRule {
	j := func(table iptables.Table, chain, target, comment string) JumpRule {
		return JumpRule{table, chain, []string{"-m", "comment", "--comment", comment, "-j", target}}
	}
	return []JumpRule{
		j(iptables.TableNAT, "PREROUTING", ChainServices, "kubernetes service portals"),
		j(iptables.TableNAT, "OUTPUT", ChainServices, "kubernetes service portals"),
		j(iptables.TableNAT, "POSTROUTING", ChainPostrouting, "kubernetes postrouting rules"),
		j(iptables.TableFilter, "INPUT", ChainIPVSFilter, "kubernetes ipvs access filter"),
		j(iptables.TableFilter, "FORWARD", ChainForward, "kubernetes forwarding rules"),
		j(iptables.TableMangle, "OUTPUT", ChainIPVSOutFilter, "kubernetes ipvs access filter"),
	}
}

// Tables are the tables holding owned chains, in the order they are
// restored.
var Tables = []iptables.Table{iptables.TableNAT, iptables.TableFilter, iptables.TableMangle}

// Chains lists the chains per table, in the order they are declared.
var Chains = map[iptables.Table][]string{
	iptables.TableNAT:    {ChainServices, ChainNodePort, ChainMarkMasq, ChainPostrouting},
	iptables.TableFilter: {ChainIPVSFilter, ChainForward},
	iptables.TableMangle: {ChainIPVSOutFilter},
}
