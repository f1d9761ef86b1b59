package inspect

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
)

// The output schema of `inspect -o json|yaml`, documented in docs/inspect.md.
// Within one APIVersion a field is never removed nor changes meaning; new
// fields may appear.
const (
	APIVersion = "ipvsproxy.io/inspect/v1"
	kindReport = "InspectReport"
)

// Report is what `ipvsproxy inspect` shows.
type Report struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Time       time.Time `json:"time"`
	// Node is the node's name when names are known.
	Node string `json:"node,omitempty"`
	// NamesFrom says where the names come from: "daemon <url>",
	// "api-server", or "" when the kernel view is unnamed.
	NamesFrom      string          `json:"namesFrom"`
	Warnings       []string        `json:"warnings"`
	VirtualServers []VirtualServer `json:"virtualServers"`
	Addresses      []Address       `json:"addresses"`
	// Routes are the Service CIDRs made local by one route on kube-ipvs0.
	Routes []Route `json:"routes"`
	Sets   []Set   `json:"sets"`
	// Status is the proxier's sync status (only from the daemon).
	Status *snapshot.SyncStatus `json:"status,omitempty"`
}

// VirtualServer is one virtual server, in the kernel, desired, or both.
type VirtualServer struct {
	Protocol string `json:"protocol"`
	Address  string `json:"address"`
	Port     uint16 `json:"port"`
	// Scheduler and PersistenceSeconds are the kernel's values (the desired
	// ones when the kernel lacks the virtual server).
	Scheduler          string `json:"scheduler"`
	PersistenceSeconds int    `json:"persistenceSeconds,omitempty"`
	// Service is "namespace/name", PortName the Service port's name; empty
	// when unnamed or not the proxier's.
	Service       string `json:"service,omitempty"`
	PortName      string `json:"portName,omitempty"`
	Type          string `json:"type,omitempty"`
	LocalOnly     bool   `json:"localOnly"`
	TopologyHints bool   `json:"topologyHints"`
	// Owner is "ipvsproxy" for the proxier's, "foreign" for one it never
	// touches, "unknown" when no daemon or configuration is at hand.
	Owner    string `json:"owner"`
	InKernel bool   `json:"inKernel"`
	Desired  bool   `json:"desired"`
	Stats    Stats  `json:"stats"`
	// Flows counts conntrack entries whose original destination is it.
	Flows       int          `json:"flows"`
	RealServers []RealServer `json:"realServers"`
}

// Key is the virtual server's IPVS key.
func (v VirtualServer) Key() ipvs.VirtualServerKey {
	return ipvs.VirtualServerKey{Protocol: parseProtocol(v.Protocol), Address: netip.MustParseAddr(v.Address), Port: v.Port}
}

// RealServer is one real server of a virtual server.
type RealServer struct {
	Address             string `json:"address"`
	Port                uint16 `json:"port"`
	Weight              int    `json:"weight"`
	ActiveConnections   int    `json:"activeConnections"`
	InactiveConnections int    `json:"inactiveConnections"`
	Stats               Stats  `json:"stats"`
	Flows               int    `json:"flows"`
	// Node is the endpoint's node; Condition ready, serving-terminating,
	// draining or unknown; DrainingUntil the deadline of a draining one.
	Node          string    `json:"node,omitempty"`
	Condition     string    `json:"condition,omitempty"`
	DrainingUntil time.Time `json:"drainingUntil,omitzero"`
	InKernel      bool      `json:"inKernel"`
	Desired       bool      `json:"desired"`
	// DesiredWeight is set when the kernel's weight differs from it.
	DesiredWeight *int `json:"desiredWeight,omitempty"`
}

// Stats are the IPVS traffic counters.
type Stats struct {
	Connections uint64 `json:"connections"`
	PacketsIn   uint64 `json:"packetsIn"`
	PacketsOut  uint64 `json:"packetsOut"`
	BytesIn     uint64 `json:"bytesIn"`
	BytesOut    uint64 `json:"bytesOut"`
}

// Address is one address on kube-ipvs0.
type Address struct {
	Address  string `json:"address"`
	InKernel bool   `json:"inKernel"`
	Desired  bool   `json:"desired"`
}

// Route is one Service CIDR's local route on kube-ipvs0, in the kernel,
// desired, or both.
type Route struct {
	CIDR     string `json:"cidr"`
	InKernel bool   `json:"inKernel"`
	Desired  bool   `json:"desired"`
}

// Set is one KUBE-* ipset.
type Set struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Members int    `json:"members"`
	// DesiredMembers is how many the proxier wants (-1 when unknown).
	DesiredMembers int `json:"desiredMembers"`
}

// NewReport joins the kernel view with the snapshot (nil: unnamed).
func NewReport(k KernelState, snap *snapshot.Snapshot, namesFrom string, now time.Time) Report {
	r := Report{APIVersion: APIVersion, Kind: kindReport, Time: now, NamesFrom: namesFrom,
		Warnings: append([]string{}, k.Warnings...), VirtualServers: []VirtualServer{}, Addresses: []Address{}, Routes: []Route{}, Sets: []Set{}}
	if k.DummyMissing {
		r.Warnings = append(r.Warnings, owned.DummyInterface+" does not exist: the proxier has not run here, or was cleaned up")
	}
	desired := map[ipvs.VirtualServerKey]*snapshot.DesiredVirtualServer{}
	draining := map[ipvs.VirtualServerKey]map[ipvs.RealServerKey]time.Time{}
	var cfg *ipvsproxy.Config
	if snap != nil {
		r.Node = snap.Node.Name
		st := snap.Status
		r.Status = &st
		cfg = &snap.Config
		for i := range snap.VirtualServers {
			desired[snap.VirtualServers[i].VirtualServerKey] = &snap.VirtualServers[i]
		}
		for _, d := range snap.Draining {
			if draining[d.VirtualServer] == nil {
				draining[d.VirtualServer] = map[ipvs.RealServerKey]time.Time{}
			}
			draining[d.VirtualServer][d.RealServer] = d.Deadline
		}
	}
	owner := ownerFunc(k, cfg)
	flows := countFlows(k.Flows)
	seen := map[ipvs.VirtualServerKey]bool{}
	for _, kvs := range k.VirtualServers {
		key := kvs.VirtualServerKey
		seen[key] = true
		v := newVirtualServer(kvs.VirtualServer)
		v.InKernel, v.Stats, v.Owner = true, statsOf(kvs.Stats), owner(key)
		v.Flows = flows.virtualServer[key]
		d := desired[key]
		if d != nil {
			v.Desired = true
			name(&v, d)
		}
		want := map[ipvs.RealServerKey]snapshot.DesiredRealServer{}
		if d != nil {
			for _, rs := range d.RealServers {
				want[rs.RealServerKey] = rs
			}
		}
		for _, krs := range kvs.RealServers {
			rs := RealServer{Address: krs.Address.String(), Port: krs.Port, Weight: int(krs.Weight),
				ActiveConnections: int(krs.ActiveConnections), InactiveConnections: int(krs.InactiveConnections),
				Stats: statsOf(krs.Stats), Flows: flows.realServer[key][krs.RealServerKey], InKernel: true}
			if w, ok := want[krs.RealServerKey]; ok {
				rs.Desired, rs.Node, rs.Condition = true, w.NodeName, w.Condition
				if w.Weight != krs.Weight {
					dw := int(w.Weight)
					rs.DesiredWeight = &dw
				}
				delete(want, krs.RealServerKey)
			} else if deadline, ok := draining[key][krs.RealServerKey]; ok {
				rs.Condition, rs.DrainingUntil = snapshot.ConditionDraining, deadline
			}
			v.RealServers = append(v.RealServers, rs)
		}
		for _, w := range want { // desired, not in the kernel
			v.RealServers = append(v.RealServers, desiredRealServer(w))
		}
		sortRealServers(v.RealServers)
		r.VirtualServers = append(r.VirtualServers, v)
	}
	for key, d := range desired {
		if seen[key] {
			continue
		}
		v := newVirtualServer(d.VirtualServer)
		v.Desired, v.Owner = true, "ipvsproxy"
		name(&v, d)
		for _, w := range d.RealServers {
			v.RealServers = append(v.RealServers, desiredRealServer(w))
		}
		sortRealServers(v.RealServers)
		r.VirtualServers = append(r.VirtualServers, v)
	}
	slices.SortFunc(r.VirtualServers, func(a, b VirtualServer) int { return compareKeys(a.Key(), b.Key()) })

	addrs := map[netip.Addr]*Address{}
	for _, a := range k.DummyAddresses {
		addrs[a] = &Address{Address: a.String(), InKernel: true}
	}
	if snap != nil {
		for _, a := range snap.Addresses {
			if addrs[a] == nil {
				addrs[a] = &Address{Address: a.String()}
			}
			addrs[a].Desired = true
		}
	}
	for _, a := range slices.SortedFunc(maps.Keys(addrs), netip.Addr.Compare) {
		r.Addresses = append(r.Addresses, *addrs[a])
	}
	routes := map[netip.Prefix]*Route{}
	for _, p := range k.ServiceRoutes {
		routes[p] = &Route{CIDR: p.String(), InKernel: true}
	}
	if snap != nil {
		for _, p := range snap.Routes {
			if routes[p] == nil {
				routes[p] = &Route{CIDR: p.String()}
			}
			routes[p].Desired = true
		}
	}
	for _, p := range slices.SortedFunc(maps.Keys(routes), comparePrefixes) {
		r.Routes = append(r.Routes, *routes[p])
	}
	wantMembers := map[string]int{}
	if snap != nil {
		for _, e := range snap.SetEntries {
			wantMembers[e.Set]++
		}
		for _, d := range snap.VirtualServers {
			set, _ := owned.Record(d.VirtualServerKey)
			wantMembers[set]++
		}
	}
	for _, name := range slices.Sorted(maps.Keys(k.Sets)) {
		s := Set{Name: name, Type: string(k.Sets[name].Type), Members: len(k.Sets[name].Entries), DesiredMembers: -1}
		if snap != nil {
			s.DesiredMembers = wantMembers[name]
		}
		r.Sets = append(r.Sets, s)
	}
	return r
}

func newVirtualServer(vs ipvs.VirtualServer) VirtualServer {
	return VirtualServer{Protocol: vs.Protocol.String(), Address: vs.Address.String(), Port: vs.Port,
		Scheduler: vs.Scheduler, PersistenceSeconds: int(vs.PersistenceTimeout / time.Second), RealServers: []RealServer{}}
}

func name(v *VirtualServer, d *snapshot.DesiredVirtualServer) {
	v.Service, v.PortName, v.Type, v.LocalOnly, v.TopologyHints = d.Service, d.PortName, d.Kind, d.LocalOnly, d.TopologyHints
}

func desiredRealServer(w snapshot.DesiredRealServer) RealServer {
	return RealServer{Address: w.Address.String(), Port: w.Port, Weight: int(w.Weight), Node: w.NodeName, Condition: w.Condition, Desired: true}
}

func statsOf(s ipvs.Stats) Stats {
	return Stats{Connections: s.Connections, PacketsIn: s.PacketsIn, PacketsOut: s.PacketsOut, BytesIn: s.BytesIn, BytesOut: s.BytesOut}
}

// ownerFunc decides ownership with the proxier's own rule
// (proxier.OwnerOf: the KUBE-IPVS-OWNED record); without a configuration
// it cannot tell.
func ownerFunc(k KernelState, cfg *ipvsproxy.Config) func(ipvs.VirtualServerKey) string {
	if cfg == nil {
		return func(ipvs.VirtualServerKey) string { return "unknown" }
	}
	sets := map[string][]ipset.Entry{}
	for name, s := range k.Sets {
		sets[name] = s.Entries
	}
	owns := proxier.OwnerOf(*cfg, sets, k.DummyAddresses, k.HostAddresses)
	return func(key ipvs.VirtualServerKey) string {
		if owns(key) {
			return "ipvsproxy"
		}
		return "foreign"
	}
}

type flowCounts struct {
	virtualServer map[ipvs.VirtualServerKey]int
	realServer    map[ipvs.VirtualServerKey]map[ipvs.RealServerKey]int
}

// countFlows counts conntrack entries per virtual server (original
// destination) and per real server (reply source, after IPVS's DNAT).
func countFlows(flows []conntrack.Flow) flowCounts {
	c := flowCounts{virtualServer: map[ipvs.VirtualServerKey]int{}, realServer: map[ipvs.VirtualServerKey]map[ipvs.RealServerKey]int{}}
	for _, f := range flows {
		key := ipvs.VirtualServerKey{Protocol: ipvs.Protocol(f.Protocol), Address: f.OrigDst.Addr().Unmap(), Port: f.OrigDst.Port()}
		c.virtualServer[key]++
		if c.realServer[key] == nil {
			c.realServer[key] = map[ipvs.RealServerKey]int{}
		}
		c.realServer[key][ipvs.RealServerKey{Address: f.ReplySrc.Addr().Unmap(), Port: f.ReplySrc.Port()}]++
	}
	return c
}

// Filter keeps the virtual servers of one Service ("ns/name") and/or one
// address (with an optional port). It fails, in a sentence, when a Service
// is named that the report does not know.
func (r *Report) Filter(service, vip string) error {
	if service == "" && vip == "" {
		return nil
	}
	var addr netip.Addr
	var port uint16
	if vip != "" {
		if ap, err := netip.ParseAddrPort(vip); err == nil {
			addr, port = ap.Addr().Unmap(), ap.Port()
		} else if a, err := netip.ParseAddr(vip); err == nil {
			addr = a.Unmap()
		} else {
			return fmt.Errorf("--vip %q is neither an address nor address:port", vip)
		}
	}
	if service != "" && !strings.Contains(service, "/") {
		service = "default/" + service
	}
	var kept []VirtualServer
	known := false
	for _, v := range r.VirtualServers {
		if service != "" {
			if v.Service != service {
				continue
			}
			known = true
		}
		if addr.IsValid() && (v.Address != addr.String() || port != 0 && v.Port != port) {
			continue
		}
		kept = append(kept, v)
	}
	if service != "" && !known {
		if r.NamesFrom == "" {
			return fmt.Errorf("cannot filter by Service %s: no names (the daemon is not reachable and no --kubeconfig was given)", service)
		}
		return fmt.Errorf("unknown Service %s: the proxier on this node programs no virtual server for it", service)
	}
	r.VirtualServers = append([]VirtualServer{}, kept...)
	return nil
}

func sortRealServers(rss []RealServer) {
	slices.SortFunc(rss, func(a, b RealServer) int {
		return netip.AddrPortFrom(netip.MustParseAddr(a.Address), a.Port).Compare(netip.AddrPortFrom(netip.MustParseAddr(b.Address), b.Port))
	})
}

func compareKeys(a, b ipvs.VirtualServerKey) int {
	if c := a.Address.Compare(b.Address); c != 0 {
		return c
	}
	if a.Port != b.Port {
		return int(a.Port) - int(b.Port)
	}
	return int(a.Protocol) - int(b.Protocol)
}

func parseProtocol(s string) ipvs.Protocol {
	switch strings.ToUpper(s) {
	case "TCP":
		return ipvs.TCP
	case "UDP":
		return ipvs.UDP
	case "SCTP":
		return ipvs.SCTP
	}
	return 0
}

func comparePrefixes(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
