package rules

import (
	"fmt"
	"net/netip"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
)

// What each rule of rules.go does to a traced packet: one traceRule per
// iptables rule, in the same order and with the same text, so that
// TestTracerModelsEveryRule fails when a rule is added, changed or removed
// without its verdict here. To change a rule: change IPTables, then the
// traceRule with the same text below.

const (
	iptablesTableNAT    = string(iptables.TableNAT)
	iptablesTableFilter = string(iptables.TableFilter)
	iptablesTableMangle = string(iptables.TableMangle)
)

// traceRule is one iptables rule as the tracer evaluates it.
type traceRule struct {
	// text is the rule exactly as IPTables writes it.
	text string
	// match reports whether the packet matches the rule's conditions.
	match func(st *packetState) bool
	// target is RETURN, DROP, REJECT, MASQUERADE, ACCEPT, an owned chain to
	// jump to, or "" for a non-terminating target (MARK).
	target string
	// effect (or describe, when it depends on the packet) says in one
	// sentence what taking the rule means.
	effect   string
	describe func(st *packetState) string
	// apply records the rule's effect on the packet.
	apply func(st *packetState, effect string)
}

// traceRules are the rules of IPTables(cfg, family, local), keyed by
// "table chain".
func traceRules(cfg ipvsproxy.Config, family v1.IPFamily, local ipvsproxy.LocalDetector) map[string][]traceRule {
	set := func(base string) string { return owned.SetName(base, family) }
	mark := fmt.Sprintf("%#x", cfg.MasqueradeMark)
	inSet := func(base string) func(st *packetState) bool {
		return func(st *packetState) bool { return st.ctx.inSet(base, st.ipPort()) }
	}
	markedBy := func(st *packetState, effect string) { st.markedBy = effect }
	passesUnmarked := func(st *packetState, effect string) {
		if !st.marked {
			st.unmarkedBecause = effect
		}
	}
	rules := map[string][]traceRule{}
	add := func(table, chain string, r traceRule) {
		r.text = fmt.Sprintf("-A %s %s", chain, r.text)
		rules[table+" "+chain] = append(rules[table+" "+chain], r)
	}

	// nat KUBE-SERVICES
	fromPod := func(st *packetState) bool { return local.FromPod(st.pkt.Source, st.pkt.InInterface) }
	switch {
	case cfg.MasqueradeAll:
		add(iptablesTableNAT, owned.ChainServices, traceRule{
			text:  fmt.Sprintf("-m set --match-set %s dst,dst -j %s", set(owned.SetClusterIP), owned.ChainMarkMasq),
			match: inSet(owned.SetClusterIP), target: owned.ChainMarkMasq, apply: markedBy,
			effect: "a cluster IP, and --masquerade-all masquerades all cluster IP traffic",
		})
	case local.Implemented():
		add(iptablesTableNAT, owned.ChainServices, traceRule{
			text: fmt.Sprintf("%s-m set --match-set %s dst,dst -j %s", ruleMatch(local.IfNotLocal), set(owned.SetClusterIP), owned.ChainMarkMasq),
			match: func(st *packetState) bool {
				return !fromPod(st) && st.ctx.inSet(owned.SetClusterIP, st.ipPort())
			}, target: owned.ChainMarkMasq, apply: markedBy,
			describe: func(st *packetState) string {
				return fmt.Sprintf("a cluster IP from %s, not pod traffic (pods are %s): masqueraded so the reply comes back through this node", st.pkt.Source, local)
			},
		})
	default:
		add(iptablesTableNAT, owned.ChainServices, traceRule{
			text: fmt.Sprintf("-m set --match-set %s src,dst -j %s", set(owned.SetClusterIP), owned.ChainMarkMasq),
			match: func(st *packetState) bool {
				return st.ctx.inSet(owned.SetClusterIP, ipset.Entry{IP: st.pkt.Source, Protocol: owned.EntryProtocol(st.pkt.Protocol), Port: st.dst.Port()})
			}, target: owned.ChainMarkMasq, apply: markedBy,
			describe: func(st *packetState) string {
				return fmt.Sprintf("sent from the service address %s to a service port, with no way to tell pod traffic: masqueraded (kube-proxy's fallback)", st.pkt.Source)
			},
		})
	}
	add(iptablesTableNAT, owned.ChainServices, traceRule{
		text:  fmt.Sprintf("-m set --match-set %s dst,dst -j ACCEPT", set(owned.SetClusterIP)),
		match: inSet(owned.SetClusterIP), target: "ACCEPT", apply: passesUnmarked,
		describe: func(st *packetState) string {
			if st.marked {
				return "a cluster IP: accepted for IPVS, no further nat rule"
			}
			return fmt.Sprintf("a cluster IP from pod traffic (%s): not masqueraded, the endpoint sees the client's address", st.pkt.Source)
		},
	})
	add(iptablesTableNAT, owned.ChainServices, traceRule{
		text:  fmt.Sprintf("-m set --match-set %s dst,dst -j %s", set(owned.SetExternalIP), owned.ChainMarkMasq),
		match: inSet(owned.SetExternalIP), target: owned.ChainMarkMasq, apply: markedBy,
		effect: "an external IP of a Service with externalTrafficPolicy Cluster: masqueraded, the endpoint may be on another node",
	})
	add(iptablesTableNAT, owned.ChainServices, traceRule{
		text:  fmt.Sprintf("-m set --match-set %s dst,dst -j %s", set(owned.SetLoadBalancer), owned.ChainMarkMasq),
		match: inSet(owned.SetLoadBalancer), target: owned.ChainMarkMasq, apply: markedBy,
		effect: "a load balancer IP of a Service with externalTrafficPolicy Cluster: masqueraded, the endpoint may be on another node",
	})
	add(iptablesTableNAT, owned.ChainServices, traceRule{
		text:  fmt.Sprintf("-m set --match-set %s dst,dst -j %s", set(owned.SetLocalNoEndpoints), owned.ChainMarkMasq),
		match: inSet(owned.SetLocalNoEndpoints), target: owned.ChainMarkMasq, apply: markedBy,
		effect: "traffic policy Local without an endpoint on this node: an in-cluster source reaches another node's endpoint, masqueraded so the reply comes back here (kubernetes#97081)",
	})
	add(iptablesTableNAT, owned.ChainServices, traceRule{
		text:  fmt.Sprintf("-m set --match-set %s dst,dst -j ACCEPT", set(owned.SetIPVSServices)),
		match: inSet(owned.SetIPVSServices), target: "ACCEPT", apply: passesUnmarked,
		describe: func(st *packetState) string {
			if st.marked {
				return "a service address and port: accepted for IPVS, no further nat rule"
			}
			return "a service address of a Service with traffic policy Local (in no marking set): not masqueraded, the endpoint sees the client's address"
		},
	})
	add(iptablesTableNAT, owned.ChainServices, traceRule{
		text:  fmt.Sprintf("-m addrtype --dst-type LOCAL -j %s", owned.ChainNodePort),
		match: func(st *packetState) bool { return st.ctx.isLocal(st.dst.Addr()) }, target: owned.ChainNodePort,
		effect: "addressed to this node: the node port rules decide",
	})
	add(iptablesTableNAT, owned.ChainServices, traceRule{
		text:  fmt.Sprintf("-m set --match-set %s dst,dst -j ACCEPT", set(owned.SetNodePorts)),
		match: inSet(owned.SetNodePorts), target: "ACCEPT", apply: passesUnmarked,
		describe: func(st *packetState) string {
			if st.marked {
				return "a node port: accepted for IPVS, no further nat rule"
			}
			return "a node port of a Service with externalTrafficPolicy Local: not masqueraded, the endpoint sees the client's address"
		},
	})

	// nat KUBE-NODE-PORT
	nodePortEffect := "a node port of a Service with externalTrafficPolicy Cluster: masqueraded, the endpoint may be on another node"
	for _, np := range []struct{ proto, base string }{{"tcp", owned.SetNodePortTCP}, {"udp", owned.SetNodePortUDP}} {
		add(iptablesTableNAT, owned.ChainNodePort, traceRule{
			text: fmt.Sprintf("-p %s -m set --match-set %s dst -j %s", np.proto, set(np.base), owned.ChainMarkMasq),
			match: func(st *packetState) bool {
				return owned.EntryProtocol(st.pkt.Protocol) == np.proto && st.ctx.inSet(np.base, ipset.Entry{Port: st.dst.Port()})
			}, target: owned.ChainMarkMasq, apply: markedBy, effect: nodePortEffect,
		})
	}
	add(iptablesTableNAT, owned.ChainNodePort, traceRule{
		text: fmt.Sprintf("-p sctp -m set --match-set %s dst,dst -j %s", set(owned.SetNodePortSCTP), owned.ChainMarkMasq),
		match: func(st *packetState) bool {
			return owned.EntryProtocol(st.pkt.Protocol) == "sctp" && st.ctx.inSet(owned.SetNodePortSCTP, st.ipPort())
		}, target: owned.ChainMarkMasq, apply: markedBy, effect: nodePortEffect,
	})

	// nat KUBE-MARK-MASQ
	add(iptablesTableNAT, owned.ChainMarkMasq, traceRule{
		text:  fmt.Sprintf("-j MARK --set-xmark %s/%s", mark, mark),
		match: func(*packetState) bool { return true },
		apply: func(st *packetState, _ string) { st.marked = true }, effect: "marked " + mark + " for masquerade",
	})

	// nat KUBE-POSTROUTING (after IPVS: the destination is the real server)
	add(iptablesTableNAT, owned.ChainPostrouting, traceRule{
		text: fmt.Sprintf("-m set --match-set %s dst,dst,src -j MASQUERADE", set(owned.SetLoopBack)),
		match: func(st *packetState) bool {
			e := st.ipPort()
			e.IP2 = st.pkt.Source
			return st.ctx.inSet(owned.SetLoopBack, e)
		},
		target: "MASQUERADE", apply: func(st *packetState, _ string) { st.hairpin = true },
		effect: "hairpin: the endpoint reaches itself through its Service, masqueraded so that its reply goes back through IPVS",
	})
	add(iptablesTableNAT, owned.ChainPostrouting, traceRule{
		text:  fmt.Sprintf("-m mark ! --mark %s/%s -j RETURN", mark, mark),
		match: func(st *packetState) bool { return !st.marked }, target: "RETURN",
		effect: "not marked: leaves with the client's address",
	})
	add(iptablesTableNAT, owned.ChainPostrouting, traceRule{
		text:  fmt.Sprintf("-j MARK --set-xmark %s/0x0", mark),
		match: func(*packetState) bool { return true },
		apply: func(st *packetState, _ string) { st.marked = false }, effect: "the mark is cleared",
	})
	add(iptablesTableNAT, owned.ChainPostrouting, traceRule{
		text:   "-j MASQUERADE --random-fully",
		match:  func(*packetState) bool { return true },
		target: "MASQUERADE", effect: "masqueraded to the outgoing address of this node",
	})

	// filter KUBE-IPVS-FILTER (INPUT, before IPVS)
	add(iptablesTableFilter, owned.ChainIPVSFilter, traceRule{
		text: fmt.Sprintf("-m set --match-set %s dst,dst -m set ! --match-set %s dst,dst,src -j DROP", set(owned.SetLBFirewall), set(owned.SetLBSourceCIDR)),
		match: func(st *packetState) bool {
			return st.ctx.inSet(owned.SetLBFirewall, st.ipPort()) && !st.ctx.sourceAllowed(st)
		},
		target: "DROP",
		describe: func(st *packetState) string {
			return fmt.Sprintf("load balancer %s has loadBalancerSourceRanges and %s is outside them", st.dst, st.pkt.Source)
		},
	})
	add(iptablesTableFilter, owned.ChainIPVSFilter, traceRule{
		text: fmt.Sprintf("%s-m set --match-set %s dst,dst -j DROP", ruleMatch(local.IfNotLocal), set(owned.SetLocalNoEndpoints)),
		match: func(st *packetState) bool {
			return !fromPod(st) && st.ctx.inSet(owned.SetLocalNoEndpoints, st.ipPort())
		},
		target: "DROP",
		describe: func(st *packetState) string {
			return fmt.Sprintf("%s has traffic policy Local and no endpoint on this node, and %s is not in-cluster traffic (pods are %s): dropped silently, as the Kubernetes docs say", st.dst, st.pkt.Source, local)
		},
	})
	verdict := serviceVerdict(cfg)
	hostRules := "returned to INPUT: the host's own rules decide next, as under kube-proxy (the trace assumes they let it through)"
	if verdict == "ACCEPT" {
		hostRules = "accepted, whatever the host firewall says later (--accept-service-traffic)"
	}
	add(iptablesTableFilter, owned.ChainIPVSFilter, traceRule{
		text:  fmt.Sprintf("-m set --match-set %s dst,dst -j %s", set(owned.SetIPVSServices), verdict),
		match: inSet(owned.SetIPVSServices), target: verdict,
		effect: "a virtual server's address and port: " + hostRules,
	})
	add(iptablesTableFilter, owned.ChainIPVSFilter, traceRule{
		text:  fmt.Sprintf("-m set --match-set %s dst,dst -j %s", set(owned.SetNodePorts), verdict),
		match: inSet(owned.SetNodePorts), target: verdict,
		effect: "a node port's virtual server: " + hostRules,
	})
	add(iptablesTableFilter, owned.ChainIPVSFilter, traceRule{
		text: fmt.Sprintf("-p tcp -m set --match-set %s dst -j ACCEPT", set(owned.SetHealthCheckPorts)),
		match: func(st *packetState) bool {
			return owned.EntryProtocol(st.pkt.Protocol) == "tcp" && st.ctx.inSet(owned.SetHealthCheckPorts, ipset.Entry{Port: st.dst.Port()})
		},
		target: "ACCEPT",
		effect: "a health check node port: probes are answered on every address, the LB IP included (kubernetes#117723)",
	})
	reject := "icmp-port-unreachable"
	if family == v1.IPv6Protocol {
		reject = "icmp6-port-unreachable"
	}
	add(iptablesTableFilter, owned.ChainIPVSFilter, traceRule{
		text: fmt.Sprintf("-m conntrack --ctstate NEW -m set --match-set %s dst -j REJECT --reject-with %s", set(owned.SetIPVSIPs), reject),
		// The first packet of a connection is traced: state NEW.
		match:  func(st *packetState) bool { return st.ctx.inSet(owned.SetIPVSIPs, ipset.Entry{IP: st.dst.Addr()}) },
		target: "REJECT",
		describe: func(st *packetState) string {
			return fmt.Sprintf("%s is a service address but %s port %d is no virtual server: answered %s, so that no host port answers there (kubernetes#72236)",
				st.dst.Addr(), st.pkt.Protocol, st.dst.Port(), reject)
		},
	})

	add(iptablesTableFilter, owned.ChainIPVSFilter, traceRule{
		text:   fmt.Sprintf("-m conntrack --ctstate NEW -m set --match-set %s dst -j REJECT --reject-with %s", set(owned.SetServiceCIDRs), reject),
		match:  func(st *packetState) bool { return st.ctx.inServiceCIDR(st.dst.Addr()) },
		target: "REJECT",
		describe: func(st *packetState) string {
			return fmt.Sprintf("%s lies in a routed Service CIDR but %s port %d is no virtual server: answered %s, so that no host port answers there (kubernetes#72236)",
				st.dst.Addr(), st.pkt.Protocol, st.dst.Port(), reject)
		},
	})

	// filter KUBE-FORWARD: only packets routed through this node pass it;
	// IPVS sends its packets out through OUTPUT, so no trace walks it.
	add(iptablesTableFilter, owned.ChainForward, traceRule{
		text:  fmt.Sprintf("-m mark --mark %s/%s -j ACCEPT", mark, mark),
		match: func(st *packetState) bool { return st.marked }, target: "ACCEPT",
		effect: "a marked packet is forwarded despite a DROP policy",
	})
	add(iptablesTableFilter, owned.ChainForward, traceRule{
		text:  "-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		match: func(*packetState) bool { return false }, target: "ACCEPT",
		effect: "replies of tracked connections are forwarded despite a DROP policy",
	})

	// mangle KUBE-IPVS-OUT-FILTER (OUTPUT, before IPVS takes the node's
	// own packets)
	add(iptablesTableMangle, owned.ChainIPVSOutFilter, traceRule{
		text:  fmt.Sprintf("-m set --match-set %s dst,dst -j DROP", set(owned.SetLBNoNodeAccess)),
		match: inSet(owned.SetLBNoNodeAccess), target: "DROP",
		effect: "the load balancer's source ranges hold no address of this node, so its own processes may not use it (kubernetes#119656)",
	})
	return rules
}

// sourceAllowed is "--match-set KUBE-LOAD-BALANCER-SRC-CIDR dst,dst,src":
// some allowed range of this load balancer port holds the source.
func (tc *traceContext) sourceAllowed(st *packetState) bool {
	want := st.ipPort()
	for e := range tc.sets[owned.SetName(owned.SetLBSourceCIDR, tc.family)] {
		if e.IP == want.IP && e.Protocol == want.Protocol && e.Port == want.Port && e.Net.Contains(st.pkt.Source) {
			return true
		}
	}
	return false
}

// inServiceCIDR is "--match-set KUBE-SERVICE-CIDRS dst": a must lie in a
// Service CIDR routed local on kube-ipvs0 (routes.go).
func (tc *traceContext) inServiceCIDR(a netip.Addr) bool {
	for e := range tc.sets[owned.SetName(owned.SetServiceCIDRs, tc.family)] {
		if e.Net.Contains(a) {
			return true
		}
	}
	return false
}
