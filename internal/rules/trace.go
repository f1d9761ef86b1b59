package rules

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
)

// The packet tracer: for a packet from SRC to DST:PORT on this node, which
// virtual server takes it, which real servers it may reach, whether it is
// masqueraded and why, and what drops it. It walks the rules of rules.go
// (one traceRule per iptables rule, in trace_rules.go, tied to the rule text
// by TestTracerModelsEveryRule) and the IPVS table of a Snapshot, so tests
// assert verdicts instead of rule text, and `ipvsproxy inspect trace`
// answers from the same desired state the daemon programs.
//
// The first packet of a connection is traced (conntrack state NEW), in the
// netfilter order of IPVS NAT mode:
//
//	from elsewhere: nat PREROUTING → route → filter INPUT → IPVS (LOCAL_IN) → nat POSTROUTING
//	from this node: mangle OUTPUT → nat OUTPUT → IPVS (LOCAL_OUT) → nat POSTROUTING

// Packet is what is traced.
type Packet struct {
	Source      netip.Addr
	Destination netip.AddrPort
	Protocol    ipvs.Protocol
	// InInterface is the interface a packet from elsewhere came in on, for
	// --detect-local-mode BridgeInterface and InterfaceNamePrefix ("" when
	// unknown: then no interface rule takes it for pod traffic).
	InInterface string
}

func (p Packet) String() string {
	return fmt.Sprintf("%s %s -> %s", p.Protocol, p.Source, p.Destination)
}

// Verdicts of a trace.
const (
	// VerdictLoadBalanced: a virtual server takes it to one of RealServers.
	VerdictLoadBalanced = "load-balanced"
	// VerdictDropped: a rule or IPVS drops it (DropReason says which).
	VerdictDropped = "dropped"
	// VerdictRejected: KUBE-IPVS-FILTER answers ICMP port unreachable.
	VerdictRejected = "rejected"
	// VerdictHost: no virtual server; the node's own sockets get it.
	VerdictHost = "host"
	// VerdictNotLocal: not addressed to this node; routed on untouched.
	VerdictNotLocal = "not-local"
)

// TraceStep is one rule (or the IPVS lookup) the packet matched.
type TraceStep struct {
	// Chain is "nat KUBE-SERVICES", "filter KUBE-IPVS-FILTER", "IPVS", ...
	Chain string `json:"chain"`
	// Rule is the iptables rule as iptables-save prints it ("" for IPVS).
	Rule string `json:"rule,omitempty"`
	// Effect says what taking the rule means for the packet.
	Effect string `json:"effect"`
}

// Trace is the answer for one packet.
type Trace struct {
	Packet Packet `json:"-"`
	// FromNode: the source is one of this node's addresses (OUTPUT path).
	FromNode bool        `json:"fromNode"`
	Steps    []TraceStep `json:"steps"`
	Verdict  string      `json:"verdict"`
	// Reason is one sentence: why this verdict.
	Reason string `json:"reason"`
	// VirtualServer takes the packet (nil when none does).
	VirtualServer *snapshot.DesiredVirtualServer `json:"virtualServer,omitempty"`
	// RealServers are those it may reach (weight > 0).
	RealServers []TraceRealServer `json:"realServers"`
}

// TraceRealServer is one real server the packet may reach, with whether it
// leaves masqueraded on the way there.
type TraceRealServer struct {
	snapshot.DesiredRealServer
	Masquerade bool `json:"masquerade"`
	// MasqueradeReason says which rule decided, or why none did.
	MasqueradeReason string `json:"masqueradeReason"`
}

// TracePacket follows pkt through the rules and the virtual servers of s.
func TracePacket(s snapshot.Snapshot, pkt Packet) Trace {
	pkt.Source, pkt.Destination = pkt.Source.Unmap(), netip.AddrPortFrom(pkt.Destination.Addr().Unmap(), pkt.Destination.Port())
	t := Trace{Packet: pkt, Steps: []TraceStep{}, RealServers: []TraceRealServer{}}
	family := ipvsproxy.FamilyOf(pkt.Destination.Addr())
	if ipvsproxy.FamilyOf(pkt.Source) != family {
		t.Verdict, t.Reason = VerdictDropped, fmt.Sprintf("source %s and destination %s are of different IP families", pkt.Source, pkt.Destination.Addr())
		return t
	}
	if !s.Config.HasFamily(family) {
		t.Verdict, t.Reason = VerdictNotLocal, fmt.Sprintf("this proxier does not proxy %s", family)
		return t
	}
	tc := newTraceContext(s, family)
	st := &packetState{pkt: pkt, dst: pkt.Destination, ctx: tc}
	t.FromNode = tc.isNodeAddress(pkt.Source)

	if t.FromNode {
		if target := tc.walk(&t, st, iptablesTableMangle, owned.ChainIPVSOutFilter); target == "DROP" {
			t.Verdict, t.Reason = VerdictDropped, owned.ChainIPVSOutFilter+" drops it: "+t.Steps[len(t.Steps)-1].Effect
			return t
		}
	}
	// nat PREROUTING or OUTPUT → KUBE-SERVICES.
	tc.walk(&t, st, iptablesTableNAT, owned.ChainServices)
	local := tc.isLocal(pkt.Destination.Addr())
	vs := tc.virtualServers[ipvs.VirtualServerKey{Protocol: pkt.Protocol, Address: pkt.Destination.Addr(), Port: pkt.Destination.Port()}]
	if !local {
		t.Verdict, t.Reason = VerdictNotLocal, fmt.Sprintf("%s is not an address of this node nor a service address; the packet is routed on and no virtual server takes it", pkt.Destination.Addr())
		return t
	}
	// IPVS sees a packet from this node at LOCAL_OUT, before it loops back
	// to INPUT: KUBE-IPVS-FILTER only sees it when no virtual server does.
	if !t.FromNode || vs == nil {
		if target := tc.walk(&t, st, iptablesTableFilter, owned.ChainIPVSFilter); target == "DROP" || target == "REJECT" {
			t.Verdict, t.Reason = VerdictDropped, owned.ChainIPVSFilter+" drops it: "+t.Steps[len(t.Steps)-1].Effect
			if target == "REJECT" {
				t.Verdict, t.Reason = VerdictRejected, owned.ChainIPVSFilter+" rejects it: "+t.Steps[len(t.Steps)-1].Effect
			}
			return t
		}
	}
	if vs == nil {
		t.Verdict, t.Reason = VerdictHost, fmt.Sprintf("no virtual server is %s %s; the node's own sockets get the packet", pkt.Protocol, pkt.Destination)
		return t
	}
	t.VirtualServer = vs
	var live []snapshot.DesiredRealServer
	for _, rs := range vs.RealServers {
		if rs.Weight > 0 {
			live = append(live, rs)
		}
	}
	policy := ""
	if vs.LocalOnly {
		policy = " (traffic policy Local: only this node's endpoints)"
	}
	if len(live) == 0 {
		t.Steps = append(t.Steps, TraceStep{Chain: "IPVS", Effect: fmt.Sprintf("virtual server %s of %s has no real server%s", vs.VirtualServerKey, vs.ServicePort(), policy)})
		t.Verdict = VerdictDropped
		t.Reason = fmt.Sprintf("IPVS drops it: %s %s of %s has no real server on this node%s; the client gets ICMP port unreachable", vs.Kind, vs.VirtualServerKey, vs.ServicePort(), policy)
		return t
	}
	effect := fmt.Sprintf("virtual server %s (%s %s%s, scheduler %s) picks one of %d real servers", vs.VirtualServerKey, vs.Kind, vs.ServicePort(), policy, vs.Scheduler, len(live))
	if vs.PersistenceTimeout > 0 {
		effect += fmt.Sprintf("; persistent: a client keeps its real server for %v", vs.PersistenceTimeout)
	}
	t.Steps = append(t.Steps, TraceStep{Chain: "IPVS", Effect: effect})
	t.Verdict = VerdictLoadBalanced
	t.Reason = effect
	// nat POSTROUTING, once per real server: after IPVS's DNAT the
	// destination is the real server, which decides hairpin masquerade.
	for _, rs := range live {
		after := *st
		after.dst = netip.AddrPortFrom(rs.Address, rs.Port)
		var steps Trace
		target := tc.walk(&steps, &after, iptablesTableNAT, owned.ChainPostrouting)
		trs := TraceRealServer{DesiredRealServer: rs, Masquerade: target == "MASQUERADE"}
		switch {
		case trs.Masquerade:
			trs.MasqueradeReason = steps.Steps[len(steps.Steps)-1].Effect
			if st.markedBy != "" && !after.hairpin {
				trs.MasqueradeReason = st.markedBy
			}
		case st.unmarkedBecause != "":
			trs.MasqueradeReason = st.unmarkedBecause
		case vs.LocalOnly:
			trs.MasqueradeReason = "traffic policy Local: no rule marks it, the endpoint sees the client's address"
		default:
			trs.MasqueradeReason = "no rule marks it: the endpoint sees the client's address"
		}
		t.RealServers = append(t.RealServers, trs)
	}
	return t
}

// packetState is what the rules have done to the packet so far.
type packetState struct {
	pkt Packet
	// dst is the destination now: the real server after IPVS.
	dst     netip.AddrPort
	ctx     *traceContext
	marked  bool
	hairpin bool
	// markedBy is the effect of the rule that marked it; unmarkedBecause
	// the effect of the rule that let it pass unmarked.
	markedBy, unmarkedBecause string
}

// traceContext indexes a Snapshot for one family.
type traceContext struct {
	snap           snapshot.Snapshot
	family         v1.IPFamily
	sets           map[string]map[ipset.Entry]bool
	virtualServers map[ipvs.VirtualServerKey]*snapshot.DesiredVirtualServer
	rules          map[string][]traceRule // by "table chain"
}

func newTraceContext(s snapshot.Snapshot, family v1.IPFamily) *traceContext {
	tc := &traceContext{snap: s, family: family, sets: map[string]map[ipset.Entry]bool{}, virtualServers: map[ipvs.VirtualServerKey]*snapshot.DesiredVirtualServer{}}
	for _, e := range s.SetEntries {
		if tc.sets[e.Set] == nil {
			tc.sets[e.Set] = map[ipset.Entry]bool{}
		}
		tc.sets[e.Set][e.Entry] = true
	}
	for i := range s.VirtualServers {
		tc.virtualServers[s.VirtualServers[i].VirtualServerKey] = &s.VirtualServers[i]
	}
	tc.rules = traceRules(s.Config, family, ipvsproxy.NewLocalDetector(s.Config, family, s.Node.PodCIDRs))
	return tc
}

func (tc *traceContext) isNodeAddress(a netip.Addr) bool {
	return a.IsLoopback() || slices.Contains(tc.snap.Node.Addresses, a)
}

// isLocal is "-m addrtype --dst-type LOCAL" and the routing decision: a
// node address or a service address (a member of KUBE-IPVS-IPS, which holds
// every address bound on kube-ipvs0, or an address of a Service CIDR that
// one route makes local, KUBE-SERVICE-CIDRS).
func (tc *traceContext) isLocal(a netip.Addr) bool {
	return tc.isNodeAddress(a) || tc.inSet(owned.SetIPVSIPs, ipset.Entry{IP: a}) || tc.inServiceCIDR(a)
}

func (tc *traceContext) inSet(base string, e ipset.Entry) bool {
	return tc.sets[owned.SetName(base, tc.family)][e]
}

// ipPort is the hash:ip,port member "dst,dst" looks up.
func (st *packetState) ipPort() ipset.Entry {
	return ipset.Entry{IP: st.dst.Addr(), Protocol: owned.EntryProtocol(st.pkt.Protocol), Port: st.dst.Port()}
}

// walk runs one chain; it returns the terminating target ("" when the
// packet left the chain by RETURN or its end). Every matched rule becomes a
// step of t.
func (tc *traceContext) walk(t *Trace, st *packetState, table, chain string) string {
	for _, r := range tc.rules[table+" "+chain] {
		if !r.match(st) {
			continue
		}
		effect := r.effect
		if r.describe != nil {
			effect = r.describe(st)
		}
		t.Steps = append(t.Steps, TraceStep{Chain: table + " " + chain, Rule: r.text, Effect: effect})
		if r.apply != nil {
			r.apply(st, effect)
		}
		switch r.target {
		case "RETURN":
			return ""
		case "DROP", "REJECT", "MASQUERADE", "ACCEPT":
			return r.target
		case "":
			continue // MARK and other non-terminating targets
		default: // a jump to an owned chain
			if target := tc.walk(t, st, table, r.target); target != "" {
				return target
			}
		}
	}
	return ""
}
