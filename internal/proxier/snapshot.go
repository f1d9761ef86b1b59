package proxier

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Snapshot returns the desired state and status as of the last sync. It is
// made from a copy of the desired state's pointers taken under the sync lock
// (the states themselves are never changed once built); naming, sorting and
// the endpoint conditions are done outside it, one caller at a time. So
// however many clients ask (the inspect endpoint needs no credentials on the
// node), a sync waits at most for one pointer copy. It is not kept: its one
// reader in the daemon, the inspect endpoint, keeps the encoding of each
// generation (SnapshotGeneration) instead.
func (p *Proxier) Snapshot() snapshot.Snapshot {
	p.snapshotMu.Lock()
	defer p.snapshotMu.Unlock()
	p.mu.Lock()
	in := p.snapshotInputs()
	p.mu.Unlock()
	return in.build(p)
}

// SnapshotGeneration changes whenever Snapshot may: it counts the syncs.
// It never waits for a sync in progress.
func (p *Proxier) SnapshotGeneration() uint64 { return p.syncs.Load() }

// snapshotInputs is what a Snapshot is made of, copied under p.mu.
type snapshotInputs struct {
	taken     time.Time
	node      ipvsproxy.NodeInfo
	cfg       ipvsproxy.Config
	winners   []*ipvsproxy.VirtualServerState
	addresses []netip.Addr
	routes    []netip.Prefix
	entries   []ipvsproxy.SetEntryKey
	draining  []snapshot.DrainingRealServer
	services  map[types.NamespacedName]*ipvsproxy.ServiceState
	status    snapshot.SyncStatus
}

func (p *Proxier) snapshotInputs() snapshotInputs {
	in := snapshotInputs{
		taken: p.now(), node: p.nodeInfo(), cfg: p.cfg, routes: slices.Clone(p.desired.Routes),
		winners:   make([]*ipvsproxy.VirtualServerState, 0, p.desired.VirtualServerCount()),
		addresses: make([]netip.Addr, 0, p.desired.AddressCount()),
		entries:   make([]ipvsproxy.SetEntryKey, 0, p.desired.SetEntryCount()),
		services:  make(map[types.NamespacedName]*ipvsproxy.ServiceState, len(p.desired.Services)),
		status:    p.statusLocked(),
	}
	for k := range p.desired.VirtualServerKeys() {
		if vs := p.desired.VirtualServer(k); vs != nil {
			in.winners = append(in.winners, vs)
		}
	}
	for a := range p.desired.Addresses() {
		in.addresses = append(in.addresses, a)
	}
	for k := range p.desired.SetEntries() {
		in.entries = append(in.entries, k)
	}
	for vs, rss := range p.draining {
		for rs, deadline := range rss {
			in.draining = append(in.draining, snapshot.DrainingRealServer{VirtualServer: vs, RealServer: rs, Deadline: deadline})
		}
	}
	for name, st := range p.desired.Services {
		in.services[name] = st
	}
	return in
}

// build names, sorts and annotates the inputs; it reads the tracker (which
// has its own lock), not the proxier's state.
func (in snapshotInputs) build(p *Proxier) snapshot.Snapshot {
	node := in.node
	s := snapshot.Snapshot{
		Taken:          in.taken,
		Node:           snapshot.Node{Name: node.Name, Zone: node.Zone, Addresses: slices.Clone(node.Addresses), PodCIDRs: slices.Clone(node.PodCIDRs)},
		Config:         in.cfg,
		VirtualServers: make([]snapshot.DesiredVirtualServer, 0, len(in.winners)),
		Addresses:      in.addresses,
		Routes:         in.routes,
		SetEntries:     make([]ipvsproxy.SetEntry, 0, len(in.entries)),
		Draining:       in.draining,
		Services:       make([]snapshot.ServiceSummary, 0, len(in.services)),
		Status:         in.status,
	}
	if s.Node.Addresses == nil {
		s.Node.Addresses = []netip.Addr{}
	}
	if s.Routes == nil {
		s.Routes = []netip.Prefix{}
	}
	if s.Draining == nil {
		s.Draining = []snapshot.DrainingRealServer{}
	}
	conds := map[types.NamespacedName]endpointConditions{}
	for _, vs := range in.winners {
		c, ok := conds[vs.Port.NamespacedName]
		if !ok {
			c = p.endpointConditions(vs.Port.NamespacedName, node, in.cfg.Families)
			conds[vs.Port.NamespacedName] = c
		}
		s.VirtualServers = append(s.VirtualServers, desiredVirtualServer(vs, c))
	}
	slices.SortFunc(s.VirtualServers, func(a, b snapshot.DesiredVirtualServer) int {
		return ipvsproxy.CompareVSKey(a.VirtualServerKey, b.VirtualServerKey)
	})
	slices.SortFunc(s.Addresses, netip.Addr.Compare)
	for _, k := range in.entries {
		s.SetEntries = append(s.SetEntries, ipvsproxy.SetEntry{Set: k.Set, Entry: k.Entry})
	}
	slices.SortFunc(s.SetEntries, ipvsproxy.CompareSetEntries)
	slices.SortFunc(s.Draining, func(a, b snapshot.DrainingRealServer) int {
		if c := ipvsproxy.CompareVSKey(a.VirtualServer, b.VirtualServer); c != 0 {
			return c
		}
		return netip.AddrPortFrom(a.RealServer.Address, a.RealServer.Port).Compare(netip.AddrPortFrom(b.RealServer.Address, b.RealServer.Port))
	})
	for name, st := range in.services {
		sum := snapshot.ServiceSummary{Name: name.String(), HealthCheckNodePort: st.HealthCheckNodePort, LocalReadyEndpoints: st.LocalReadyEndpoints}
		for _, pr := range st.Problems {
			sum.Problems = append(sum.Problems, pr.String())
		}
		s.Services = append(s.Services, sum)
	}
	slices.SortFunc(s.Services, func(a, b snapshot.ServiceSummary) int { return strings.Compare(a.Name, b.Name) })
	return s
}

// endpointConditions are a Service's endpoints by port and address, with
// whether topology hints narrowed each port's cluster endpoints.
type endpointConditions struct {
	endpoints map[ipvsproxy.PortKey]map[netip.AddrPort]ipvsproxy.Endpoint
	topology  map[ipvsproxy.PortKey]bool
}

// endpointConditions reads the Service's current EndpointSlices with the
// builder's own functions (endpointsByPort, topologyMode).
func (p *Proxier) endpointConditions(name types.NamespacedName, node ipvsproxy.NodeInfo, families []v1.IPFamily) endpointConditions {
	c := endpointConditions{endpoints: map[ipvsproxy.PortKey]map[netip.AddrPort]ipvsproxy.Endpoint{}, topology: map[ipvsproxy.PortKey]bool{}}
	endpointSlices := p.tracker.EndpointSlicesOf(name)
	for _, family := range families {
		byPort, _ := ipvsproxy.EndpointsByPort(endpointSlices, family, ipvsproxy.NewEndpointPolicy(name, &p.cfg, &node))
		for k, eps := range byPort {
			if c.endpoints[k] == nil {
				c.endpoints[k] = map[netip.AddrPort]ipvsproxy.Endpoint{}
			}
			for _, e := range eps {
				c.endpoints[k][netip.AddrPortFrom(e.Addr, e.Port)] = e
			}
			c.topology[k] = c.topology[k] || ipvsproxy.TopologyMode(eps, node) != ipvsproxy.TopologyNone
		}
	}
	return c
}

func desiredVirtualServer(vs *ipvsproxy.VirtualServerState, c endpointConditions) snapshot.DesiredVirtualServer {
	pk := ipvsproxy.PortKey{Name: vs.Port.Port, Protocol: vs.Port.Protocol}
	out := snapshot.DesiredVirtualServer{
		VirtualServer: vs.VirtualServer, Service: vs.Port.NamespacedName.String(), PortName: vs.Port.Port,
		Kind: vs.Kind.String(), LocalOnly: vs.LocalOnly, InClusterOnly: vs.InClusterOnly,
		// Hints narrow cluster endpoints only; local ones are this node's anyway.
		TopologyHints: (!vs.LocalOnly || vs.InClusterOnly) && c.topology[pk],
		RealServers:   []snapshot.DesiredRealServer{},
	}
	for _, rs := range vs.RealServers.All() {
		d := snapshot.DesiredRealServer{RealServer: rs, Condition: snapshot.ConditionUnknown}
		if e, ok := c.endpoints[pk][netip.AddrPortFrom(rs.Address, rs.Port)]; ok {
			d.NodeName = e.NodeName
			switch {
			case e.Ready:
				d.Condition = snapshot.ConditionReady
			case e.Serving && e.Terminating:
				d.Condition = snapshot.ConditionServingTerminating
			}
		}
		out.RealServers = append(out.RealServers, d)
	}
	return out
}

// OwnedSetNames lists the kernel names of the ipsets the proxier owns for
// the families (inspect --check compares their members).
func OwnedSetNames(families []v1.IPFamily) []string {
	var out []string
	for _, s := range owned.Sets(families, 0) { // names only; maxelem does not matter
		out = append(out, s.Name)
	}
	return out
}

// VirtualServerNames maps each desired virtual server to the Service port
// it serves, cheaper than a Snapshot (per-Service metrics read it on every
// scrape).
func (p *Proxier) VirtualServerNames() map[ipvs.VirtualServerKey]ipvsproxy.ServicePortName {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[ipvs.VirtualServerKey]ipvsproxy.ServicePortName, p.desired.VirtualServerCount())
	for k := range p.desired.VirtualServerKeys() {
		out[k] = p.desired.VirtualServer(k).Port
	}
	return out
}
