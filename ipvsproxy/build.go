package ipvsproxy

import (
	"cmp"
	"fmt"
	"iter"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/listeners"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// This file is where a Service becomes IPVS entries. BuildService is pure:
// same input, same output, no syscalls, so it is tested with golden dumps and
// fuzzed.

// NodeInfo is what the builder needs to know about this node.
type NodeInfo struct {
	Name string
	// Zone is the node's topology.kubernetes.io/zone label.
	Zone string
	// Addresses are the node's own addresses (every interface but
	// kube-ipvs0), candidates for NodePort virtual servers.
	Addresses []netip.Addr
	// PodCIDRs are the Node's spec.podCIDRs: no external IP may lie in them.
	PodCIDRs []netip.Prefix
	// ClusterIPs lists, per cluster IP, the Services holding it (sorted): an
	// external IP that is another Service's cluster IP is refused. It is what
	// this node knows of the cluster, passed in so the builder stays pure.
	ClusterIPs map[netip.Addr][]types.NamespacedName
	// ServiceCIDRs are the ranges of the networking.k8s.io/v1 ServiceCIDR
	// objects (Config.ServiceCIDRs adds the flag's): no external IP may lie
	// in them.
	ServiceCIDRs []netip.Prefix
	// RoutedServiceCIDRs are to be made local by one route each on
	// kube-ipvs0: a cluster IP inside one is not bound while its route is
	// in place (routes.go).
	RoutedServiceCIDRs []netip.Prefix
	// Listening are this node's listening sockets, OtherNodes the addresses
	// of every other Node (to its name), APIServers the endpoint addresses
	// of default/kubernetes: the address guard (addressguard.go) keeps
	// every address a Service names off them.
	Listening  []listeners.Listener
	OtherNodes map[netip.Addr]string
	APIServers []netip.Addr
}

// VirtualServerKind is the kind of address a virtual server serves, a
// byte in every virtual server the desired state holds.
type VirtualServerKind uint8

// Virtual server kinds, as a person reading `inspect` knows them (String).
const (
	KindClusterIP VirtualServerKind = iota + 1
	KindExternalIP
	KindLoadBalancer
	KindNodePort
)

func (k VirtualServerKind) String() string {
	switch k {
	case KindClusterIP:
		return "ClusterIP"
	case KindExternalIP:
		return "ExternalIP"
	case KindLoadBalancer:
		return "LoadBalancer"
	case KindNodePort:
		return "NodePort"
	}
	return fmt.Sprintf("kind-%d", uint8(k))
}

// VirtualServerState is one virtual server the proxier wants, with its real
// servers and the Service port it serves.
//
// The desired state holds one per virtual server of the node for as long
// as the daemon runs: its small fields share the last word (184 bytes, a
// Service's one in a 192-byte object where it took 240).
type VirtualServerState struct {
	ipvs.VirtualServer
	// RealServers are sorted by address and port.
	RealServers RealServerList
	Port        ServicePortName
	// SetEntries are the set members that exist for this virtual server,
	// sorted. One member may exist for several (a node port's port, a
	// hairpin endpoint, an address's KUBE-IPVS-IPS member); the desired
	// state holds a member while the Service wins one of them.
	SetEntries setEntries
	Kind       VirtualServerKind
	// LocalOnly is true when only this node's endpoints may serve it
	// (externalTrafficPolicy or internalTrafficPolicy Local).
	LocalOnly bool
	// Bound is true when the address is bound on kube-ipvs0 for it.
	Bound bool
	// InClusterOnly is set on a LocalOnly external address (LB, external
	// IP, node port) that has no endpoint on this node: its real servers
	// are the cluster endpoints, for in-cluster sources only; the rules
	// drop every other source (KUBE-LOCAL-NO-ENDPOINTS).
	InClusterOnly bool
	// routedBits is the length of the routed range (RoutedBy) plus one, 0
	// for none: the range holds the address, so its length says which.
	routedBits uint8
}

// RoutedBy is the routed Service CIDR (masked, as the model routes them)
// that makes a cluster IP local instead; not valid for none. While that
// route is not in place (the kernel refused it, or another owner's route
// holds the range) the desired state binds the address, with its
// KUBE-IPVS-IPS member, as if Bound (desired.go).
func (vs *VirtualServerState) RoutedBy() netip.Prefix {
	if vs.routedBits == 0 {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(vs.Address, int(vs.routedBits)-1).Masked()
}

func (vs *VirtualServerState) setRoutedBy(r netip.Prefix) { vs.routedBits = uint8(r.Bits() + 1) }

// ServiceState is everything one Service wants from the kernel of this node.
//
// The desired state holds one per Service: 128 bytes, the creation time in
// 8 of them.
type ServiceState struct {
	Name types.NamespacedName
	// created orders Services when two want the same virtual server: the
	// older keeps it (Created).
	created        keptTime
	VirtualServers []VirtualServerState
	// Addresses (bound on kube-ipvs0) are the union of the virtual
	// servers' own, sorted (normalize); their set members are not copied
	// here (SetEntryKeys): at 10,000 Services the copy held 2.3 MB.
	Addresses []netip.Addr
	// HealthCheckNodePort is non-zero for a LoadBalancer Service with
	// externalTrafficPolicy Local.
	HealthCheckNodePort uint16
	// LocalReadyEndpoints counts this node's distinct ready endpoint
	// addresses; terminating ones do not count (the health check answer).
	LocalReadyEndpoints int
	Problems            []Problem
}

// Created is the Service's metadata.creationTimestamp.
func (st *ServiceState) Created() time.Time { return st.created.time() }

// defaultAffinityTimeout is Kubernetes' default ClientIP affinity (3 hours).
const defaultAffinityTimeout = 10800 * time.Second

// BuildService computes what svc and its EndpointSlices need on this node.
// Bad parts of the input are skipped and listed in Problems; the rest is
// still built.
func BuildService(svc *v1.Service, endpointSlices []*EndpointSlice, node NodeInfo, cfg Config) *ServiceState {
	st := &ServiceState{Name: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, created: keepTime(svc.CreationTimestamp.Time)}
	// ExternalName Services are DNS only; headless ones have no virtual IP.
	if svc.Spec.Type == v1.ServiceTypeExternalName || svc.Spec.ClusterIP == v1.ClusterIPNone {
		return st
	}
	b := builder{svc: svc, node: node, cfg: cfg, st: st, ref: serviceRef(svc), vsSeen: map[ipvs.VirtualServerKey]bool{}}
	ports := b.validPorts()
	if why := b.tooLarge(ports, endpointSlices); why != "" {
		st.Problems = boundProblems(st.Problems)
		return tooLargeState(st, b.ref, why)
	}
	affinity := b.affinity()
	scheduler, schedulerFlags := b.scheduler()
	externalLocal := svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
	internalLocal := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal
	localReady := map[netip.Addr]bool{}

	for _, family := range cfg.Families {
		clusterIP, ok := b.clusterIP(family)
		if !ok {
			continue
		}
		// Every address the Service names passes the address guard
		// (addressguard.go); a refused cluster IP leaves the family's
		// other virtual servers (node ports) served.
		serveClusterIP := len(b.guarded(fieldClusterIP, []netip.Addr{clusterIP})) > 0
		endpoints, problems := EndpointsByPort(endpointSlices, family, NewEndpointPolicy(st.Name, &b.cfg, &b.node))
		st.Problems = append(st.Problems, problems...)
		externalIPs := b.guarded(fieldExternalIP, b.addresses(family, svc.Spec.ExternalIPs, "external IP"))
		lbIPs := b.guarded(fieldLoadBalancerIP, b.loadBalancerIPs(family))
		sourceRanges, firewalled := b.sourceRanges(family)
		nodeAddrs := nodePortAddresses(node, cfg, family)
		// Source ranges that hold no node address keep node and hostNetwork
		// processes out too (kubernetes#119656).
		nodeAllowed := slices.ContainsFunc(nodeAddresses(node, family), func(a netip.Addr) bool {
			return slices.ContainsFunc(sourceRanges, func(r netip.Prefix) bool { return r.Contains(a) })
		})

		for _, port := range ports {
			name := ServicePortName{NamespacedName: st.Name, Port: port.Name, Protocol: port.Protocol}
			eps := endpoints[PortKey{Name: port.Name, Protocol: port.Protocol}]
			for _, e := range eps {
				if e.Ready && e.NodeName == node.Name {
					localReady[e.Addr] = true
				}
			}
			cluster, local := trafficEndpoints(eps, node)
			internal, external := cluster, cluster
			if internalLocal {
				internal = local
			}
			// Local policy without a local endpoint: in-cluster sources (pods,
			// the node) still reach the cluster endpoints, as with kube-proxy
			// (kubernetes#97081); the rules drop every other source, so an
			// external client never reaches a remote pod whose reply would be
			// lost.
			inClusterOnly := externalLocal && len(local) == 0
			if externalLocal && !inClusterOnly {
				external = local
			}
			proto := strings.ToLower(string(port.Protocol))
			// Every set member and bound address exists for some virtual
			// servers of this Service: scope names them (indices into
			// st.VirtualServers), so that a Service that loses a virtual
			// server to another programs nothing for it (desired.go).
			var scope, portScope, nodePortScope []int
			vs := func(addr netip.Addr, p uint16, kind VirtualServerKind, eps []Endpoint, localOnly bool) bool {
				i := len(st.VirtualServers)
				scope = nil
				if !b.addVirtualServer(ipvs.VirtualServer{
					VirtualServerKey:   ipvs.VirtualServerKey{Protocol: ipvsProtocol(port.Protocol), Address: addr, Port: p},
					Scheduler:          scheduler,
					SchedulerFlags:     schedulerFlags,
					PersistenceTimeout: affinity,
				}, name, kind, eps, localOnly, kind != KindClusterIP && inClusterOnly) {
					return false
				}
				scope = []int{i}
				portScope = append(portScope, i)
				return true
			}
			entry := func(set string, e ipset.Entry) {
				for _, i := range scope {
					st.VirtualServers[i].SetEntries.Add(SetEntry{Set: owned.SetName(set, family), Entry: e})
				}
			}
			bind := func() {
				for _, i := range scope {
					st.VirtualServers[i].Bound = true
				}
			}
			ipPort := func(a netip.Addr) ipset.Entry { return ipset.Entry{IP: a, Protocol: proto, Port: uint16(port.Port)} }

			if serveClusterIP && b.portAllowed(fieldClusterIP, clusterIP, port.Protocol, uint16(port.Port)) &&
				vs(clusterIP, uint16(port.Port), KindClusterIP, internal, internalLocal) {
				// One route makes a routed Service CIDR local: its cluster
				// IPs are not bound one by one while the route is in place
				// (routes.go; the desired state binds them while it is not).
				if r, ok := node.routedBy(clusterIP); ok {
					for _, i := range scope {
						st.VirtualServers[i].setRoutedBy(r)
					}
				} else {
					bind()
				}
				entry(owned.SetClusterIP, ipPort(clusterIP))
				entry(owned.SetIPVSServices, ipPort(clusterIP))
			}
			// An address another interface of the node already holds (k3s
			// ServiceLB, kube-vip) is served but never bound on kube-ipvs0,
			// so it is not in KUBE-IPVS-IPS and its other ports (ssh, the
			// kubelet) are not rejected (kubernetes#115019, k3s#7183).
			serveExternal := func(ip netip.Addr) {
				if !node.isOwn(ip) {
					bind()
				}
				entry(owned.SetIPVSServices, ipPort(ip))
				if inClusterOnly {
					entry(owned.SetLocalNoEndpoints, ipPort(ip))
				}
			}
			for _, ip := range externalIPs {
				if !b.portAllowed(fieldExternalIP, ip, port.Protocol, uint16(port.Port)) ||
					!vs(ip, uint16(port.Port), KindExternalIP, external, externalLocal) {
					continue
				}
				serveExternal(ip)
				if !externalLocal {
					entry(owned.SetExternalIP, ipPort(ip))
				}
			}
			for _, ip := range lbIPs {
				if !b.portAllowed(fieldLoadBalancerIP, ip, port.Protocol, uint16(port.Port)) ||
					!vs(ip, uint16(port.Port), KindLoadBalancer, external, externalLocal) {
					continue
				}
				serveExternal(ip)
				if !externalLocal {
					entry(owned.SetLoadBalancer, ipPort(ip))
				}
				if firewalled {
					entry(owned.SetLBFirewall, ipPort(ip))
					for _, r := range sourceRanges {
						e := ipPort(ip)
						e.Net = r
						entry(owned.SetLBSourceCIDR, e)
					}
					if !nodeAllowed {
						entry(owned.SetLBNoNodeAccess, ipPort(ip))
					}
				}
			}
			if port.NodePort != 0 && b.validNodePort(port) {
				np := uint16(port.NodePort)
				for _, addr := range nodeAddrs {
					if !vs(addr, np, KindNodePort, external, externalLocal) {
						continue
					}
					nodePortScope = append(nodePortScope, scope...)
					e := ipset.Entry{IP: addr, Protocol: proto, Port: np}
					entry(owned.SetNodePorts, e)
					if inClusterOnly {
						entry(owned.SetLocalNoEndpoints, e)
					}
					if port.Protocol == v1.ProtocolSCTP && !externalLocal {
						entry(owned.SetNodePortSCTP, e)
					}
				}
				if scope = nodePortScope; !externalLocal && len(nodeAddrs) > 0 {
					switch port.Protocol {
					case v1.ProtocolTCP:
						entry(owned.SetNodePortTCP, ipset.Entry{Port: np})
					case v1.ProtocolUDP:
						entry(owned.SetNodePortUDP, ipset.Entry{Port: np})
					}
				}
			}
			// A local endpoint reaching itself through the Service must be
			// masqueraded or its own reply would bypass IPVS (hairpin).
			scope = portScope
			for _, e := range union(internal, external) {
				if e.NodeName == node.Name {
					entry(owned.SetLoopBack, ipset.Entry{IP: e.Addr, Protocol: proto, Port: e.Port, IP2: e.Addr})
				}
			}
		}
	}
	if svc.Spec.Type == v1.ServiceTypeLoadBalancer && externalLocal && svc.Spec.HealthCheckNodePort != 0 {
		if svc.Spec.HealthCheckNodePort < 1 || svc.Spec.HealthCheckNodePort > 65535 {
			b.problem(ReasonInvalidService, "healthCheckNodePort %d out of range", svc.Spec.HealthCheckNodePort)
		} else {
			st.HealthCheckNodePort = uint16(svc.Spec.HealthCheckNodePort)
			// Probes reach it on every address, the LB IP included
			// (kubernetes#117723), even under an INPUT policy of DROP. The
			// member belongs to each of the Service's virtual servers, so it
			// exists while the Service wins one (desired.go).
			for i := range st.VirtualServers {
				vs := &st.VirtualServers[i]
				vs.SetEntries.Add(SetEntry{Set: owned.SetName(owned.SetHealthCheckPorts, FamilyOf(vs.Address)), Entry: ipset.Entry{Port: st.HealthCheckNodePort}})
			}
		}
	}
	st.LocalReadyEndpoints = len(localReady)
	for i := range st.VirtualServers {
		if vs := &st.VirtualServers[i]; vs.Bound {
			vs.SetEntries.Add(SetEntry{Set: owned.SetName(owned.SetIPVSIPs, FamilyOf(vs.Address)), Entry: ipset.Entry{IP: vs.Address}})
		}
	}
	st.normalize()
	st.Problems = boundProblems(st.Problems)
	if why := b.exceeds(st); why != "" {
		return tooLargeState(st, b.ref, why)
	}
	return st
}

// builder carries one BuildService call's context.
type builder struct {
	svc    *v1.Service
	node   NodeInfo
	cfg    Config
	st     *ServiceState
	ref    v1.ObjectReference
	vsSeen map[ipvs.VirtualServerKey]bool
	// listedFrom and listed are the endpoints the last real-server list
	// was made of, and the list: a port's cluster IP, node ports and
	// external addresses mostly serve the same endpoints, and share one
	// list (never changed once built) instead of one copy each.
	listedFrom []Endpoint
	listed     RealServerList
}

func (b *builder) problem(reason, format string, args ...any) {
	b.st.Problems = append(b.st.Problems, Problem{Object: b.ref, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// validPorts drops ports the kernel could not serve, and repeats.
func (b *builder) validPorts() []v1.ServicePort {
	var out []v1.ServicePort
	seen := map[PortKey]bool{}
	seenNumber := map[string]bool{}
	for _, p := range b.svc.Spec.Ports {
		switch {
		case p.Port < 1 || p.Port > 65535:
			b.problem(ReasonInvalidService, "port %q: %d out of range", p.Name, p.Port)
		case ipvsProtocol(p.Protocol) == 0:
			b.problem(ReasonInvalidService, "port %q: unsupported protocol %q", p.Name, p.Protocol)
		case seen[PortKey{p.Name, p.Protocol}] || seenNumber[fmt.Sprintf("%s/%d", p.Protocol, p.Port)]:
			b.problem(ReasonInvalidService, "port %q (%d/%s) repeats another port", p.Name, p.Port, p.Protocol)
		default:
			seen[PortKey{p.Name, p.Protocol}] = true
			seenNumber[fmt.Sprintf("%s/%d", p.Protocol, p.Port)] = true
			out = append(out, p)
		}
	}
	return out
}

func (b *builder) validNodePort(p v1.ServicePort) bool {
	if p.NodePort < 1 || p.NodePort > 65535 {
		b.problem(ReasonInvalidService, "port %q: nodePort %d out of range", p.Name, p.NodePort)
		return false
	}
	return true
}

// affinity is the persistence timeout for ClientIP session affinity.
func (b *builder) affinity() time.Duration {
	if b.svc.Spec.SessionAffinity != v1.ServiceAffinityClientIP {
		return 0
	}
	c := b.svc.Spec.SessionAffinityConfig
	if c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
		return defaultAffinityTimeout
	}
	if s := *c.ClientIP.TimeoutSeconds; s >= 1 && s <= 86400 {
		return time.Duration(s) * time.Second
	}
	b.problem(ReasonInvalidService, "sessionAffinity timeout %d out of range 1-86400; using %v", *c.ClientIP.TimeoutSeconds, defaultAffinityTimeout)
	return defaultAffinityTimeout
}

// clusterIP is the Service's cluster IP of family, if any.
func (b *builder) clusterIP(family v1.IPFamily) (netip.Addr, bool) {
	ips := b.svc.Spec.ClusterIPs
	if len(ips) == 0 && b.svc.Spec.ClusterIP != "" {
		ips = []string{b.svc.Spec.ClusterIP}
	}
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			if family == b.cfg.Families[0] { // report once, not per family
				b.problem(ReasonInvalidService, "cluster IP %q is not an IP address", s)
			}
			continue
		}
		a = a.Unmap()
		// --ipvs-exclude-cidrs protects what the kernel holds, never
		// limits what a Service gets: see Config.excluded.
		if FamilyOf(a) == family {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// addresses parses the list, keeping valid ones of family; bad ones are
// reported once (on the first family).
func (b *builder) addresses(family v1.IPFamily, list []string, what string) []netip.Addr {
	var out []netip.Addr
	for _, s := range list {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" || !a.IsGlobalUnicast() {
			if family == b.cfg.Families[0] {
				b.problem(ReasonInvalidService, "%s %q is not a usable IP address", what, s)
			}
			continue
		}
		a = a.Unmap()
		if FamilyOf(a) == family && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// loadBalancerIPs are the ingress IPs in VIP mode; Proxy mode ones belong to
// the load balancer, which delivers to node ports itself (KEP-1860).
func (b *builder) loadBalancerIPs(family v1.IPFamily) []netip.Addr {
	if b.svc.Spec.Type != v1.ServiceTypeLoadBalancer {
		return nil
	}
	var list []string
	for _, ing := range b.svc.Status.LoadBalancer.Ingress {
		if ing.IP == "" || ing.IPMode != nil && *ing.IPMode == v1.LoadBalancerIPModeProxy {
			continue
		}
		list = append(list, ing.IP)
	}
	return b.addresses(family, list, "load balancer IP")
}

// sourceRanges are the loadBalancerSourceRanges of family, and whether the
// family's LB IPs are firewalled at all. Each range is read as kube-proxy
// reads it (parseSourceRange). A zero-length prefix (0.0.0.0/0, ::/0) lets
// everyone in, as in kube-proxy (the kernel's hash:ip,port,net cannot even
// hold one). A range that cannot be parsed fails closed for both families:
// the firewall stays on and that range admits nobody, where kube-proxy drops
// it and, with no other range of the family, opens the load balancer.
func (b *builder) sourceRanges(family v1.IPFamily) (ranges []netip.Prefix, firewalled bool) {
	if b.svc.Spec.Type != v1.ServiceTypeLoadBalancer {
		return nil, false
	}
	allowAll := false
	for _, s := range b.svc.Spec.LoadBalancerSourceRanges {
		p, ok := parseSourceRange(s)
		if !ok {
			if family == b.cfg.Families[0] {
				b.problem(ReasonInvalidService, "loadBalancerSourceRange %q is not a CIDR; it admits no source", s)
			}
			firewalled = true
			continue
		}
		if FamilyOf(p.Addr()) != family {
			continue
		}
		allowAll = allowAll || p.Bits() == 0
		if !slices.Contains(ranges, p) {
			ranges = append(ranges, p)
		}
		firewalled = true
	}
	if allowAll {
		return nil, false
	}
	return ranges, firewalled
}

// parseSourceRange reads one loadBalancerSourceRanges value as kube-proxy
// does (pkg/proxy/util MapCIDRsByIPFamily, net.ParseCIDR): spaces around it
// are ignored, host bits dropped, and an IPv4-mapped IPv6 range of 96 bits or
// more (::ffff:192.0.2.0/120) is the IPv4 range it maps (192.0.2.0/24), so it
// firewalls the IPv4 load balancer. Taken for IPv6, it left an IPv4 load
// balancer with such ranges open to every source. Zones, a missing length
// and leading zeros (kube-proxy reads 010 as 10; the API server refuses it)
// do not parse.
func parseSourceRange(s string) (netip.Prefix, bool) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, false
	}
	p = p.Masked()
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p, true
}

// addVirtualServer records a virtual server unless the Service already has
// one with the same key (e.g. an external IP equal to the cluster IP).
func (b *builder) addVirtualServer(vs ipvs.VirtualServer, port ServicePortName, kind VirtualServerKind, eps []Endpoint, localOnly, inClusterOnly bool) bool {
	if b.vsSeen[vs.VirtualServerKey] {
		b.problem(ReasonPortConflict, "%s %s repeats another port of the same Service; skipped", kind, vs.VirtualServerKey)
		return false
	}
	b.vsSeen[vs.VirtualServerKey] = true
	state := VirtualServerState{VirtualServer: vs, Port: port, Kind: kind, LocalOnly: localOnly, InClusterOnly: inClusterOnly, RealServers: b.realServers(eps)}
	b.st.VirtualServers = append(b.st.VirtualServers, state)
	return true
}

// realServers is the sorted list of eps, the last one made when it was made
// of the same endpoints (realServers of the builder).
func (b *builder) realServers(eps []Endpoint) RealServerList {
	if len(eps) > 0 && len(eps) == len(b.listedFrom) && &eps[0] == &b.listedFrom[0] {
		return b.listed
	}
	// At its size: appended, 10 real servers took room for 16, and the
	// desired state holds every one of the node's for as long as it runs.
	l := make(RealServerList, 0, len(eps))
	for _, e := range eps {
		l = append(l, packRealServer(ipvs.RealServer{
			RealServerKey: ipvs.RealServerKey{Address: e.Addr, Port: e.Port},
			Weight:        1,
		}))
	}
	l.sort()
	b.listedFrom, b.listed = eps, l
	return l
}

// nodePortAddresses are the node's addresses of family that get NodePort
// virtual servers. Loopback and link-local addresses are left out: IPVS
// cannot serve NodePorts on them (kubernetes#96879).
func nodePortAddresses(node NodeInfo, cfg Config, family v1.IPFamily) []netip.Addr {
	var out []netip.Addr
	for _, a := range node.Addresses {
		a = a.Unmap()
		if FamilyOf(a) != family || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() || !a.IsValid() {
			continue
		}
		if len(cfg.NodePortAddresses) > 0 && !slices.ContainsFunc(cfg.NodePortAddresses, func(p netip.Prefix) bool { return p.Contains(a) }) {
			continue
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// nodeAddresses are the node's own addresses of family that a process on
// it may send from: every interface's but loopback and link-local ones.
func nodeAddresses(node NodeInfo, family v1.IPFamily) []netip.Addr {
	var out []netip.Addr
	for _, a := range node.Addresses {
		if a = a.Unmap(); a.IsValid() && FamilyOf(a) == family && !a.IsLoopback() && !a.IsLinkLocalUnicast() {
			out = append(out, a)
		}
	}
	return out
}

func ipvsProtocol(p v1.Protocol) ipvs.Protocol {
	switch p {
	case v1.ProtocolTCP:
		return ipvs.TCP
	case v1.ProtocolUDP:
		return ipvs.UDP
	case v1.ProtocolSCTP:
		return ipvs.SCTP
	}
	return 0
}

// union is a, then the endpoints of b not in a (by address and port). It is
// linear: a Service with 20,000 endpoints took 0.73 s per port and rebuild
// with a scan of out per endpoint.
func union(a, b []Endpoint) []Endpoint {
	if len(b) == 0 || len(a) == len(b) && &a[0] == &b[0] {
		// The common case (b is a, or empty) costs no copy; callers only
		// read the result.
		return a
	}
	out := append(make([]Endpoint, 0, len(a)+len(b)), a...)
	seen := make(map[netip.AddrPort]bool, len(a)+len(b))
	for _, e := range a {
		seen[netip.AddrPortFrom(e.Addr, e.Port)] = true
	}
	for _, e := range b {
		if k := netip.AddrPortFrom(e.Addr, e.Port); !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	return out
}

// normalize sorts and de-duplicates so that equal input gives equal output.
func (st *ServiceState) normalize() {
	slices.SortFunc(st.VirtualServers, func(a, b VirtualServerState) int { return CompareVSKey(a.VirtualServerKey, b.VirtualServerKey) })
	st.Addresses = nil
	for i := range st.VirtualServers {
		vs := &st.VirtualServers[i]
		vs.SetEntries.normalize()
		if vs.Bound {
			st.Addresses = append(st.Addresses, vs.Address)
		}
	}
	slices.SortFunc(st.Addresses, netip.Addr.Compare)
	st.Addresses = slices.Compact(st.Addresses)
}

// SetEntryKeys yields each member the Service's virtual servers want, once,
// in no particular order.
func (st *ServiceState) SetEntryKeys() iter.Seq[SetEntryKey] {
	return func(yield func(SetEntryKey) bool) {
		seen := map[SetEntryKey]bool{}
		for i := range st.VirtualServers {
			for e := range st.VirtualServers[i].SetEntries.All() {
				k := e.Key()
				if seen[k] {
					continue
				}
				seen[k] = true
				if !yield(k) {
					return
				}
			}
		}
	}
}

// CompareSetEntries orders by set, then field by field; it allocates
// nothing, since it runs for every member of every Service built.
func CompareSetEntries(a, b SetEntry) int {
	return cmp.Or(
		strings.Compare(a.Set, b.Set),
		a.Entry.IP.Compare(b.Entry.IP),
		strings.Compare(a.Entry.Protocol, b.Entry.Protocol),
		cmp.Compare(a.Entry.Port, b.Entry.Port),
		a.Entry.IP2.Compare(b.Entry.IP2),
		a.Entry.Net.Addr().Compare(b.Entry.Net.Addr()),
		cmp.Compare(a.Entry.Net.Bits(), b.Entry.Net.Bits()),
	)
}

func CompareVSKey(a, b ipvs.VirtualServerKey) int {
	if c := a.Address.Compare(b.Address); c != 0 {
		return c
	}
	if a.Port != b.Port {
		return int(a.Port) - int(b.Port)
	}
	return int(a.Protocol) - int(b.Protocol)
}

func CompareRealServerKeys(a, b ipvs.RealServerKey) int {
	return cmp.Or(a.Address.Compare(b.Address), cmp.Compare(a.Port, b.Port))
}
