package ipvsproxy

import (
	"fmt"

	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/iptables"
	v1 "k8s.io/api/core/v1"
)

// What each rule of rules.go does to a traced packet: one traceRule per
// iptables rule, in the same order and with the same text, so that
// TestTracerModelsEveryRule fails when a rule is added, changed or removed
// without its verdict here. To change a rule: change iptablesRules, then the
// traceRule with the same text below.

const (
	iptablesTableNAT    = string(iptables.TableNAT)
	iptablesTableFilter = string(iptables.TableFilter)
	iptablesTableMangle = string(iptables.TableMangle)
)

// traceRule is one iptables rule as the tracer evaluates it.
type traceRule struct {
	// text is the rule exactly as iptablesRules writes it.
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

// traceRules are the rules of iptablesRules(cfg, family, local), keyed by
// "table chain".
func traceRules(cfg Config, family v1.IPFamily, local localDetector) map[string][]traceRule {
	set := func(base string) string { return setName(base, family) }
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
	fromPod := func(st *packetState) bool { return local.fromPod(st.pkt.Source, st.pkt.InInterface) }
	switch {
	case cfg.MasqueradeAll:
		add(iptablesTableNAT, chainServices, traceRule{
			text:  fmt.Sprintf("-m set --match-set %s dst,dst -j %s", set(setClusterIP), chainMarkMasq),
			match: inSet(setClusterIP), target: chainMarkMasq, apply: markedBy,
			effect: "a cluster IP, and --masquerade-all masquerades all cluster IP traffic",
		})
	case local.implemented():
		add(iptablesTableNAT, chainServices, traceRule{
			text: fmt.Sprintf("%s-m set --match-set %s dst,dst -j %s", ruleMatch(local.ifNotLocal), set(setClusterIP), chainMarkMasq),
			match: func(st *packetState) bool {
				return !fromPod(st) && st.ctx.inSet(setClusterIP, st.ipPort())
			}, target: chainMarkMasq, apply: markedBy,
			describe: func(st *packetState) string {
				return fmt.Sprintf("a cluster IP from %s, not pod traffic (pods are %s): masqueraded so the reply comes back through this node", st.pkt.Source, local)
			},
		})
	default:
		add(iptablesTableNAT, chainServices, traceRule{
			text: fmt.Sprintf("-m set --match-set %s src,dst -j %s", set(setClusterIP), chainMarkMasq),
			match: func(st *packetState) bool {
				return st.ctx.inSet(setClusterIP, ipset.Entry{IP: st.pkt.Source, Protocol: protocolName(st.pkt.Protocol), Port: st.dst.Port()})
			}, target: chainMarkMasq, apply: markedBy,
			describe: func(st *packetState) string {
				return fmt.Sprintf("sent from the service address %s to a service port, with no way to tell pod traffic: masqueraded (kube-proxy's fallback)", st.pkt.Source)
			},
		})
	}
	add(iptablesTableNAT, chainServices, traceRule{
		text:  fmt.Sprintf("-m set --match-set %s dst,dst -j ACCEPT", set(setClusterIP)),
		match: inSet(setClusterIP), target: "ACCEPT", apply: passesUnmarked,
		describe: func(st *packetState) string {
			if st.marked {
				return "a cluster IP: accepted for IPVS, no further nat rule"
			}
			return fmt.Sprintf("a cluster IP from pod traffic (%s): not masqueraded, the endpoint sees the client's address", st.pkt.Source)
		},
	})
	add(iptablesTableNAT, chainServices, traceRule{
		text:  fmt.Sprintf("-m set --match-set %s dst,dst -j %s", set(setExternalIP), chainMarkMasq),
		match: inSet(setExternalIP), target: chainMarkMasq, apply: markedBy,
		effect: "an external IP of a Service with externalTrafficPolicy Cluster: masqueraded, the endpoint may be on another node",
	})
	add(iptablesTableNAT, chainServices, traceRule{
		text:  fmt.Sprintf("-m set --match-set %s dst,dst -j %s", set(setLoadBalancer), chainMarkMasq),
		match: inSet(setLoadBalancer), target: chainMarkMasq, apply: markedBy,
		effect: "a load balancer IP of a Service with externalTrafficPolicy Cluster: masqueraded, the endpoint may be on another node",
	})
	add(iptablesTableNAT, chainServices, traceRule{
		text:  fmt.Sprintf("-m set --match-set %s dst,dst -j %s", set(setLocalNoEndpoints), chainMarkMasq),
		match: inSet(setLocalNoEndpoints), target: chainMarkMasq, apply: markedBy,
		effect: "traffic policy Local without an endpoint on this node: an in-cluster source reaches another node's endpoint, masqueraded so the reply comes back here (kubernetes#97081)",
	})
	add(iptablesTableNAT, chainServices, traceRule{
		text:  fmt.Sprintf("-m set --match-set %s dst,dst -j ACCEPT", set(setIPVSServices)),
		match: inSet(setIPVSServices), target: "ACCEPT", apply: passesUnmarked,
		describe: func(st *packetState) string {
			if st.marked {
				return "a service address and port: accepted for IPVS, no further nat rule"
			}
			return "a service address of a Service with traffic policy Local (in no marking set): not masqueraded, the endpoint sees the client's address"
		},
	})
	add(iptablesTableNAT, chainServices, traceRule{
		text:  fmt.Sprintf("-m addrtype --dst-type LOCAL -j %s", chainNodePort),
		match: func(st *packetState) bool { return st.ctx.isLocal(st.dst.Addr()) }, target: chainNodePort,
		effect: "addressed to this node: the node port rules decide",
	})
	add(iptablesTableNAT, chainServices, traceRule{
		text:  fmt.Sprintf("-m set --match-set %s dst,dst -j ACCEPT", set(setNodePorts)),
		match: inSet(setNodePorts), target: "ACCEPT", apply: passesUnmarked,
		describe: func(st *packetState) string {
			if st.marked {
				return "a node port: accepted for IPVS, no further nat rule"
			}
			return "a node port of a Service with externalTrafficPolicy Local: not masqueraded, the endpoint sees the client's address"
		},
	})

	// nat KUBE-NODE-PORT
	nodePortEffect := "a node port of a Service with externalTrafficPolicy Cluster: masqueraded, the endpoint may be on another node"
	for _, np := range []struct{ proto, base string }{{"tcp", setNodePortTCP}, {"udp", setNodePortUDP}} {
		add(iptablesTableNAT, chainNodePort, traceRule{
			text: fmt.Sprintf("-p %s -m set --match-set %s dst -j %s", np.proto, set(np.base), chainMarkMasq),
			match: func(st *packetState) bool {
				return protocolName(st.pkt.Protocol) == np.proto && st.ctx.inSet(np.base, ipset.Entry{Port: st.dst.Port()})
			}, target: chainMarkMasq, apply: markedBy, effect: nodePortEffect,
		})
	}
	add(iptablesTableNAT, chainNodePort, traceRule{
		text: fmt.Sprintf("-p sctp -m set --match-set %s dst,dst -j %s", set(setNodePortSCTP), chainMarkMasq),
		match: func(st *packetState) bool {
			return protocolName(st.pkt.Protocol) == "sctp" && st.ctx.inSet(setNodePortSCTP, st.ipPort())
		}, target: chainMarkMasq, apply: markedBy, effect: nodePortEffect,
	})

	// nat KUBE-MARK-MASQ
	add(iptablesTableNAT, chainMarkMasq, traceRule{
		text:  fmt.Sprintf("-j MARK --set-xmark %s/%s", mark, mark),
		match: func(*packetState) bool { return true },
		apply: func(st *packetState, _ string) { st.marked = true }, effect: "marked " + mark + " for masquerade",
	})

	// nat KUBE-POSTROUTING (after IPVS: the destination is the real server)
	add(iptablesTableNAT, chainPostrouting, traceRule{
		text: fmt.Sprintf("-m set --match-set %s dst,dst,src -j MASQUERADE", set(setLoopBack)),
		match: func(st *packetState) bool {
			e := st.ipPort()
			e.IP2 = st.pkt.Source
			return st.ctx.inSet(setLoopBack, e)
		},
		target: "MASQUERADE", apply: func(st *packetState, _ string) { st.hairpin = true },
		effect: "hairpin: the endpoint reaches itself through its Service, masqueraded so that its reply goes back through IPVS",
	})
	add(iptablesTableNAT, chainPostrouting, traceRule{
		text:  fmt.Sprintf("-m mark ! --mark %s/%s -j RETURN", mark, mark),
		match: func(st *packetState) bool { return !st.marked }, target: "RETURN",
		effect: "not marked: leaves with the client's address",
	})
	add(iptablesTableNAT, chainPostrouting, traceRule{
		text:  fmt.Sprintf("-j MARK --set-xmark %s/0x0", mark),
		match: func(*packetState) bool { return true },
		apply: func(st *packetState, _ string) { st.marked = false }, effect: "the mark is cleared",
	})
	add(iptablesTableNAT, chainPostrouting, traceRule{
		text:   "-j MASQUERADE --random-fully",
		match:  func(*packetState) bool { return true },
		target: "MASQUERADE", effect: "masqueraded to the outgoing address of this node",
	})

	// filter KUBE-IPVS-FILTER (INPUT, before IPVS)
	add(iptablesTableFilter, chainIPVSFilter, traceRule{
		text: fmt.Sprintf("-m set --match-set %s dst,dst -m set ! --match-set %s dst,dst,src -j DROP", set(setLBFirewall), set(setLBSourceCIDR)),
		match: func(st *packetState) bool {
			return st.ctx.inSet(setLBFirewall, st.ipPort()) && !st.ctx.sourceAllowed(st)
		},
		target: "DROP",
		describe: func(st *packetState) string {
			return fmt.Sprintf("load balancer %s has loadBalancerSourceRanges and %s is outside them", st.dst, st.pkt.Source)
		},
	})
	add(iptablesTableFilter, chainIPVSFilter, traceRule{
		text: fmt.Sprintf("%s-m set --match-set %s dst,dst -j DROP", ruleMatch(local.ifNotLocal), set(setLocalNoEndpoints)),
		match: func(st *packetState) bool {
			return !fromPod(st) && st.ctx.inSet(setLocalNoEndpoints, st.ipPort())
		},
		target: "DROP",
		describe: func(st *packetState) string {
			return fmt.Sprintf("%s has traffic policy Local and no endpoint on this node, and %s is not in-cluster traffic (pods are %s): dropped silently, as the Kubernetes docs say", st.dst, st.pkt.Source, local)
		},
	})
	add(iptablesTableFilter, chainIPVSFilter, traceRule{
		text:  fmt.Sprintf("-m set --match-set %s dst,dst -j ACCEPT", set(setIPVSServices)),
		match: inSet(setIPVSServices), target: "ACCEPT",
		effect: "a virtual server's address and port: accepted, whatever the host firewall says later",
	})
	add(iptablesTableFilter, chainIPVSFilter, traceRule{
		text:  fmt.Sprintf("-m set --match-set %s dst,dst -j ACCEPT", set(setNodePorts)),
		match: inSet(setNodePorts), target: "ACCEPT",
		effect: "a node port's virtual server: accepted, whatever the host firewall says later",
	})
	add(iptablesTableFilter, chainIPVSFilter, traceRule{
		text: fmt.Sprintf("-p tcp -m set --match-set %s dst -j ACCEPT", set(setHealthCheckPorts)),
		match: func(st *packetState) bool {
			return protocolName(st.pkt.Protocol) == "tcp" && st.ctx.inSet(setHealthCheckPorts, ipset.Entry{Port: st.dst.Port()})
		},
		target: "ACCEPT",
		effect: "a health check node port: probes are answered on every address, the LB IP included (kubernetes#117723)",
	})
	reject := "icmp-port-unreachable"
	if family == v1.IPv6Protocol {
		reject = "icmp6-port-unreachable"
	}
	add(iptablesTableFilter, chainIPVSFilter, traceRule{
		text: fmt.Sprintf("-m conntrack --ctstate NEW -m set --match-set %s dst -j REJECT --reject-with %s", set(setIPVSIPs), reject),
		// The first packet of a connection is traced: state NEW.
		match:  func(st *packetState) bool { return st.ctx.inSet(setIPVSIPs, ipset.Entry{IP: st.dst.Addr()}) },
		target: "REJECT",
		describe: func(st *packetState) string {
			return fmt.Sprintf("%s is a service address but %s port %d is no virtual server: answered %s, so that no host port answers there (kubernetes#72236)",
				st.dst.Addr(), st.pkt.Protocol, st.dst.Port(), reject)
		},
	})

	// filter KUBE-FORWARD: only packets routed through this node pass it;
	// IPVS sends its packets out through OUTPUT, so no trace walks it.
	add(iptablesTableFilter, chainForward, traceRule{
		text:  fmt.Sprintf("-m mark --mark %s/%s -j ACCEPT", mark, mark),
		match: func(st *packetState) bool { return st.marked }, target: "ACCEPT",
		effect: "a marked packet is forwarded despite a DROP policy",
	})
	add(iptablesTableFilter, chainForward, traceRule{
		text:  "-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
		match: func(*packetState) bool { return false }, target: "ACCEPT",
		effect: "replies of tracked connections are forwarded despite a DROP policy",
	})

	// mangle KUBE-IPVS-OUT-FILTER (OUTPUT, before IPVS takes the node's
	// own packets)
	add(iptablesTableMangle, chainIPVSOutFilter, traceRule{
		text:  fmt.Sprintf("-m set --match-set %s dst,dst -j DROP", set(setLBNoNodeAccess)),
		match: inSet(setLBNoNodeAccess), target: "DROP",
		effect: "the load balancer's source ranges hold no address of this node, so its own processes may not use it (kubernetes#119656)",
	})
	return rules
}

// sourceAllowed is "--match-set KUBE-LOAD-BALANCER-SRC-CIDR dst,dst,src":
// some allowed range of this load balancer port holds the source.
func (tc *traceContext) sourceAllowed(st *packetState) bool {
	want := st.ipPort()
	for e := range tc.sets[setName(setLBSourceCIDR, tc.family)] {
		if e.IP == want.IP && e.Protocol == want.Protocol && e.Port == want.Port && e.Net.Contains(st.pkt.Source) {
			return true
		}
	}
	return false
}
