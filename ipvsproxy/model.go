package ipvsproxy

import (
	"maps"
	"net/netip"
	"slices"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/listeners"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// Model is the proxier's model from one sync to the next: the desired
// state and everything it was decided with — which Services hold each
// cluster IP (the address guard's cross-Service facts), the admission
// count of every owned set, the node and guard facts it was built against.
// Update is its one entry point: from the changes the tracker drained, the
// node and what the writer observed in the kernel, it computes everything
// the kernel should hold, as kube-proxy's svcPortMap.Update does for its
// Services. The writer (internal/proxier) only reads the desired state and
// reports what it found (Observed); it never changes it.
type Model struct {
	cfg      Config
	nodeName string
	tracker  *ChangeTracker
	nodes    *ClusterNodes
	// workers is how many goroutines a large build may use (buildall.go):
	// the writer passes the number of cores, which the model does not read.
	workers int

	desired    *DesiredState
	clusterIPs *ClusterIPIndex
	// admission refuses Services that would overflow an owned set or the
	// node's real servers (admission.go).
	admission *Admission
	// guard are the facts of the node guard the last build read
	// (guard_sync.go); built the node every ServiceState was built for.
	guard guardFacts
	built BuiltNode
	// started is set by the first build. Before it the desired state is
	// empty, so every Service would look new: its UDP flows must not be
	// flushed as if it had just gained endpoints (a restart drops no flow).
	started bool
	// refusedRanges are the Service CIDRs not routed, and why (logged once).
	refusedRanges map[netip.Prefix]string
}

// NewModel returns the model of the node nodeName, reading the Services and
// EndpointSlices from tracker and the other Nodes' addresses from nodes; a
// build of many Services may use up to workers goroutines. The tracker
// serves this model alone: it keeps what the model's cluster-IP index last
// recorded of each Service.
func NewModel(cfg Config, nodeName string, tracker *ChangeTracker, nodes *ClusterNodes, workers int) *Model {
	return &Model{
		cfg: cfg, nodeName: nodeName, tracker: tracker, nodes: nodes, workers: max(workers, 1),
		desired:    NewDesiredState(),
		clusterIPs: NewClusterIPIndex(),
		admission:  NewAdmission(cfg.IPSetMaxElements, cfg.Limits),
	}
}

// Desired is the desired state, for the writer and inspect to read: only
// the model changes it.
func (m *Model) Desired() *DesiredState { return m.desired }

// SetSizes are the members each owned set holds in the desired state (the
// writer sizes the sets it creates by them). Read it only.
func (m *Model) SetSizes() map[string]int { return m.admission.SetSizes() }

// RefusedServices are the Services refused for want of room, sorted.
func (m *Model) RefusedServices() []types.NamespacedName { return m.admission.RefusedServices() }

// Observed is what the writer found in the kernel that what the kernel
// should hold depends on. The model takes what a read found in at the next
// Update, and what a sync's writes found at once (TakeIn), so that the
// same sync writes what follows from it; the writer never changes the
// desired state itself.
type Observed struct {
	// HostAddresses and Listening are the node's own addresses and
	// listening sockets as last read: the node's NodePort addresses and the
	// address guard's facts.
	HostAddresses []netip.Addr
	Listening     []listeners.Listener
	// Foreign, when not nil (a full read), are all the keys the kernel holds
	// someone else's virtual server at; the others are no longer foreign.
	Foreign map[ipvs.VirtualServerKey]bool
	// FoundForeign are keys a write found someone else's virtual server at
	// (created after the last full read).
	FoundForeign []ipvs.VirtualServerKey
	// Routes, when not nil (a full sync's routes pass), say whether the
	// route of each wanted Service CIDR is in place.
	Routes map[netip.Prefix]bool
}

// Input is one Update's: the changes drained from the tracker, whether the
// sync is full (the kernel was just read), and what the writer observed.
type Input struct {
	Changes  PendingChanges
	Full     bool
	Observed Observed
}

// Result is what an Update changed beside the desired state.
type Result struct {
	// Services are the Services rebuilt, or whose admission changed: each
	// is told its problems.
	Services map[types.NamespacedName]bool
	// StaleFlows select the UDP flows the changes left pointing at an
	// endpoint that is gone, or that a port's first endpoint must not
	// find (StaleUDPFlows).
	StaleFlows []conntrack.Filter
	// VirtualServers, after a first build, is how many virtual servers it
	// claimed, for the writer to size its view; 0 otherwise.
	VirtualServers int
}

// Update puts the changes and what the writer observed into the desired
// state, recording in t what may have changed. On a full sync that may
// build Services differently (the node or the ranges changed, or nothing
// was built yet) it rebuilds every Service, else only the changed ones: a
// full sync with nothing new only compares the kernel with the desired
// state (rebuilding all made the periodic resync of 10,000 Services slow).
// Services with a problem are rebuilt on every full sync: a refusal may
// have gone (room in a set). So are the Services that depend on what
// changed: those naming a cluster IP that came or went, and those whose
// addresses a fact of the node guard changed for. t is a pointer because
// a first build sizes its maps for every Service.
func (m *Model) Update(in Input, t *Touched) Result {
	full := in.Full
	if full {
		// Which Service CIDRs are routed depends on the ranges and the
		// node's addresses alone; the writer finds whether each route is
		// in place (Observed.Routes).
		m.desired.setServiceRoutes(m.routedServiceCIDRs(in.Observed.HostAddresses), *t)
	}
	node := m.NodeInfo(in.Observed.HostAddresses, in.Observed.Listening)
	names := in.Changes.Services
	if names == nil {
		names = map[types.NamespacedName]bool{}
	}
	if full && !m.built.Same(node) {
		m.built = BuiltFrom(node)
		names = map[types.NamespacedName]bool{}
		for _, n := range m.tracker.ServiceNames() {
			names[n] = true
		}
		for n := range m.desired.Services {
			names[n] = true
		}
	} else if full {
		for n, st := range m.desired.Services {
			if len(st.Problems) > 0 {
				names[n] = true
			}
		}
	}
	// The external IP guard reads other Services' cluster IPs: when one
	// comes or goes, the Services naming it as an external IP are rebuilt.
	var dependents []types.NamespacedName
	for name := range names {
		indexed, current := m.tracker.indexService(name)
		dependents = append(dependents, m.clusterIPs.Update(name, indexed, current)...)
	}
	dependents = append(dependents, m.guardDependents(guardFacts{listening: node.Listening, otherNodes: node.OtherNodes, apiServers: node.APIServers}, node)...)
	for _, name := range dependents {
		names[name] = true
	}
	res := Result{Services: names}
	built := m.buildServices(names, node)
	if len(m.desired.Services) == 0 {
		res.VirtualServers = reserveFor(built, m.desired, t)
	}
	m.admission.Sort(built)
	for _, b := range built {
		name, st := b.Name, m.admission.Admit(m.desired, b.Name, b.State)
		if m.started {
			res.StaleFlows = append(res.StaleFlows, StaleUDPFlows(m.desired.Services[name], st)...)
		}
		m.desired.set(name, st, *t)
	}
	if m.admission.UnderPressure() && (len(built) > 0 || full) {
		for _, name := range m.readmit(node, *t, &res.StaleFlows) {
			names[name] = true
		}
	}
	m.TakeIn(in.Observed, *t)
	// The desired state now holds every Service: from here on a Service
	// that looks new is new (its UDP flows may be flushed).
	m.started = true
	return res
}

// TakeIn puts what the writer observed into the desired state, recording in
// t what changed, and says whether anything did. Someone else's virtual
// server wins its key: the Service that wanted it loses it and programs
// nothing for it. A Service CIDR whose route is not in place has its
// cluster IPs bound one by one meanwhile. The sync whose writes found
// either writes what changed in the same sync.
func (m *Model) TakeIn(o Observed, t Touched) (changed bool) {
	d := m.desired
	for _, r := range d.Routes {
		if inPlace, ok := o.Routes[r]; ok {
			changed = d.setRouted(r, inPlace, t) || changed
		}
	}
	if o.Routes != nil {
		for _, r := range slices.Collect(d.UnroutedRanges()) {
			if !slices.Contains(d.Routes, r) {
				changed = d.setRouted(r, true, t) || changed // no longer wanted: nothing to bind for it
			}
		}
	}
	if o.Foreign != nil {
		for _, k := range slices.Collect(d.ForeignKeys()) {
			if !o.Foreign[k] {
				changed = d.setForeign(k, false, t) || changed
			}
		}
		for k := range o.Foreign {
			changed = d.setForeign(k, true, t) || changed
		}
	}
	for _, k := range o.FoundForeign {
		changed = d.setForeign(k, true, t) || changed
	}
	return changed
}

// NodeInfo describes this node for the builder, with the host's addresses
// and listening sockets as the writer last read them.
func (m *Model) NodeInfo(hostAddresses []netip.Addr, listening []listeners.Listener) NodeInfo {
	info := NodeInfo{Name: m.nodeName, ClusterIPs: m.clusterIPs.Owners, Addresses: hostAddresses, Listening: listening}
	if n := m.tracker.Node(); n != nil {
		info.Zone = n.Labels[v1.LabelTopologyZone]
		info.PodCIDRs = PodCIDRsOf(n)
	}
	info.OtherNodes = m.nodes.Others(m.nodeName)
	info.APIServers = APIServerAddresses(m.tracker.EndpointSlicesOf(KubernetesService))
	info.ServiceCIDRs = m.tracker.ServiceCIDRRanges()
	info.RoutedServiceCIDRs = m.desired.Routes
	return info
}

// routedServiceCIDRs decides which Service CIDRs get a route: the flag's
// and the ServiceCIDR objects' ranges of the proxied families, except one
// that would make more local than Service IPs (Unroutable). Those are
// refused (logged once) and their cluster IPs bound one by one.
func (m *Model) routedServiceCIDRs(host []netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	refused := map[netip.Prefix]string{}
	for _, r := range SortedPrefixes(append(slices.Clone(m.cfg.ServiceCIDRs), m.tracker.ServiceCIDRRanges()...)) {
		r = r.Masked()
		if !m.cfg.HasFamily(FamilyOf(r.Addr())) {
			continue
		}
		if why := Unroutable(r, m.cfg, host); why != "" {
			refused[r] = why
			continue
		}
		out = append(out, r)
	}
	if !maps.Equal(refused, m.refusedRanges) {
		for r, why := range refused {
			klog.ErrorS(nil, "Not routing a Service CIDR; its cluster IPs are bound one by one", "cidr", r, "reason", why)
		}
		m.refusedRanges = refused
	}
	return out
}
