package ipvsproxy

import (
	"fmt"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// Endpoint is one address:port that can serve a Service port.
type Endpoint struct {
	Addr netip.Addr
	Port uint16
	// Conditions, with the EndpointSlice API's defaults for nil: ready and
	// serving default to true, terminating to false.
	Ready, Serving, Terminating bool
	NodeName                    string
	ZoneHints, NodeHints        []string
}

func (e Endpoint) String() string { return netip.AddrPortFrom(e.Addr, e.Port).String() }

// EndpointsByPort collects the valid endpoints of each port of the slices
// (all of one Service), keyed by port name and protocol, for one family.
// Bad endpoints, and those policy refuses, are skipped and reported.
func EndpointsByPort(slices_ []*EndpointSlice, family v1.IPFamily, policy endpointPolicy) (map[PortKey][]Endpoint, []Problem) {
	lists := map[PortKey]*endpointList{}
	var problems []Problem
	for _, slice := range slices_ {
		if string(slice.AddressType) != string(family) {
			continue // the other family's slices, and FQDN ones, are not ours
		}
		ref := v1.ObjectReference{Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1", Namespace: slice.Namespace, Name: slice.Name, UID: slice.UID()}
		bad := func(format string, args ...any) {
			problems = append(problems, Problem{Object: ref, Reason: ReasonInvalidEndpoint, Message: fmt.Sprintf(format, args...)})
		}
		// A refused address is reported once per slice, not per port.
		var refused map[netip.Addr]bool
		for _, port := range slice.Ports {
			if !port.HasPort {
				continue // the EndpointSlice API allows a port-less slice; nothing to proxy
			}
			if port.Port < 1 || port.Port > 65535 {
				bad("port %d out of range", port.Port)
				continue
			}
			key := PortKey{Name: port.Name, Protocol: port.Protocol}
			list := lists[key]
			if list == nil {
				list = &endpointList{eps: make([]Endpoint, 0, len(slice.Endpoints))}
				lists[key] = list
			}
			for i := range slice.Endpoints {
				ep := &slice.Endpoints[i]
				// Only the first address is used: the API says consumers
				// may assume the rest are interchangeable (kubernetes#106267).
				addr, text, ok := slice.Address(i)
				if !ok {
					if ep.HasAddress() {
						bad("endpoint address %q is not an IP address", text)
					}
					continue
				}
				if FamilyOf(addr) != family {
					bad("endpoint address %s is not %s", addr, family)
					continue
				}
				if why := policy.refusal(addr); why != "" {
					if !refused[addr] {
						if refused == nil {
							refused = map[netip.Addr]bool{}
						}
						refused[addr] = true
						problems = append(problems, Problem{Object: ref, Reason: ReasonEndpointRefused,
							Message: fmt.Sprintf("endpoint address %s %s; not a real server of Service %s", addr, why, policy.Service)})
					}
					continue
				}
				e := Endpoint{
					Addr:        addr,
					Port:        uint16(port.Port),
					Ready:       ep.Ready(),
					Serving:     ep.Serving(),
					Terminating: ep.Terminating(),
					NodeName:    ep.NodeName(),
				}
				e.ZoneHints, e.NodeHints = slice.Hints(i)
				if j, dup := list.find(e.Addr, e.Port); dup {
					// Overlap is legal while the controller moves an
					// endpoint between slices; keep the ready copy.
					if !list.eps[j].Ready && e.Ready {
						list.eps[j] = e
					}
					problems = append(problems, Problem{Object: ref, Reason: ReasonInvalidEndpoint, Scope: ScopeLog,
						Message: fmt.Sprintf("endpoint %s of port %q listed twice; using one", e, key.Name)})
					continue
				}
				list.add(e)
			}
		}
	}
	out := make(map[PortKey][]Endpoint, len(lists))
	for k, list := range lists {
		slices.SortFunc(list.eps, func(a, b Endpoint) int {
			return netip.AddrPortFrom(a.Addr, a.Port).Compare(netip.AddrPortFrom(b.Addr, b.Port))
		})
		out[k] = list.eps
	}
	return out, problems
}

// endpointList is one port's endpoints. The index that finds repeats is
// built only once the list is long: below that a scan is cheaper than a
// map per port of every Service (a third of building one).
type endpointList struct {
	eps   []Endpoint
	index map[netip.AddrPort]int
}

const endpointIndexMin = 16

func (l *endpointList) find(addr netip.Addr, port uint16) (int, bool) {
	if l.index != nil {
		i, ok := l.index[netip.AddrPortFrom(addr, port)]
		return i, ok
	}
	for i := range l.eps {
		if l.eps[i].Port == port && l.eps[i].Addr == addr {
			return i, true
		}
	}
	return 0, false
}

func (l *endpointList) add(e Endpoint) {
	l.eps = append(l.eps, e)
	switch {
	case l.index != nil:
		l.index[netip.AddrPortFrom(e.Addr, e.Port)] = len(l.eps) - 1
	case len(l.eps) > endpointIndexMin:
		l.index = make(map[netip.AddrPort]int, 2*len(l.eps))
		for i, x := range l.eps {
			l.index[netip.AddrPortFrom(x.Addr, x.Port)] = i
		}
	}
}

type PortKey struct {
	Name     string
	Protocol v1.Protocol
}

// trafficEndpoints splits a port's endpoints the way kube-proxy does
// (pkg/proxy/topology.go): cluster endpoints are ready ones, narrowed by
// topology hints when every ready endpoint has one for this node or zone,
// else serving-and-terminating ones when none is ready; local endpoints are
// this node's ready ones, else its serving-and-terminating ones. Not-ready
// endpoints are never used.
func trafficEndpoints(eps []Endpoint, node NodeInfo) (cluster, local []Endpoint) {
	mode := TopologyMode(eps, node)
	allReady, anyLocal := true, false
	for _, e := range eps {
		allReady = allReady && e.Ready
		anyLocal = anyLocal || e.NodeName == node.Name
	}
	if allReady && mode == TopologyNone && !anyLocal {
		// The common case costs no copy: every endpoint serves the
		// cluster, none is local. Callers only read the slices.
		return eps, nil
	}
	for _, e := range eps {
		if e.Ready && availableForTopology(e, mode, node) {
			cluster = append(cluster, e)
		}
	}
	if len(cluster) == 0 {
		for _, e := range eps {
			if e.Serving && e.Terminating {
				cluster = append(cluster, e)
			}
		}
	}
	for _, e := range eps {
		if e.Ready && e.NodeName == node.Name {
			local = append(local, e)
		}
	}
	if len(local) == 0 {
		for _, e := range eps {
			if e.Serving && e.Terminating && e.NodeName == node.Name {
				local = append(local, e)
			}
		}
	}
	return cluster, local
}

const (
	TopologyNone = iota
	topologySameNode
	topologySameZone
)

// TopologyMode follows hints only when every ready endpoint carries one and
// some hint names this node (or zone); otherwise hints are ignored so that a
// half-updated slice never blackholes traffic.
func TopologyMode(eps []Endpoint, node NodeInfo) int {
	anyReady, allNode, forNode, allZone, forZone := false, true, false, true, false
	for _, e := range eps {
		if !e.Ready {
			continue
		}
		anyReady = true
		if len(e.NodeHints) == 0 {
			allNode = false
		} else if slices.Contains(e.NodeHints, node.Name) {
			forNode = true
		}
		if len(e.ZoneHints) == 0 {
			allZone = false
		} else if node.Zone != "" && slices.Contains(e.ZoneHints, node.Zone) {
			forZone = true
		}
	}
	switch {
	case !anyReady:
		return TopologyNone
	case allNode && forNode:
		return topologySameNode
	case allZone && forZone:
		return topologySameZone
	}
	return TopologyNone
}

func availableForTopology(e Endpoint, mode int, node NodeInfo) bool {
	switch mode {
	case topologySameNode:
		return slices.Contains(e.NodeHints, node.Name)
	case topologySameZone:
		return slices.Contains(e.ZoneHints, node.Zone)
	}
	return true
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
