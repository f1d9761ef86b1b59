package ipvsproxy

import (
	"encoding/binary"
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// EndpointSlice is what the proxier keeps of a discovery.EndpointSlice: the
// tracker holds these as the daemon's only cache of slices, not the API objects.
// Every node caches every slice of the cluster, and a decoded
// discovery.Endpoint cost about 280 bytes after trimming (a pointer and an
// allocation per field); an endpoint here is 16 bytes in one array per
// slice, an IPv6 address 16 more beside it (BenchmarkCachedSliceMemory). Nothing is lost that a reader uses:
// an address that does not parse is kept as written, so it is reported as
// before, and ToDiscovery gives back the API object's kept fields.
//
// It is never written after CompactEndpointSlice builds it: the tracker
// and whoever it hands it to share it.
type EndpointSlice struct {
	Namespace, Name string
	// identity holds the UID and the resource version the informer's queue
	// reads.
	identity objectIdentity
	// ServiceName is the kubernetes.io/service-name label, "" when unset.
	ServiceName string
	// trigger is the endpoints.kubernetes.io/last-change-trigger-time
	// annotation in Unix nanoseconds, noTrigger when none: an annotation
	// that does not parse counts as none, as for network programming
	// latency.
	trigger     int64
	AddressType discovery.AddressType
	Ports       []SlicePort
	Endpoints   []sliceEndpoint
	// addrs6 are the endpoints' IPv6 addresses, which an endpoint names by
	// index: an IPv4 one is kept in the endpoint itself, in 4 bytes.
	addrs6 [][16]byte
	// rare holds what few slices have, nil when the slice has none of it:
	// one pointer instead of three lists in every slice.
	rare *rareParts
}

// rareParts are an EndpointSlice's addresses that are not kept as 16
// bytes, and its topology hints.
type rareParts struct {
	// texts are the first addresses that are kept as written (they do not
	// parse as an IP address, or carry a zone); an endpoint names its own
	// by index.
	texts []string
	// more are the endpoints' second and later addresses, by endpoint: the
	// proxier uses the first alone (the API says the rest are
	// interchangeable), the API server guard reads them all.
	more []moreAddresses
	// hints are the distinct topology hints of the slice's endpoints; an
	// endpoint names its own by index.
	hints []sliceHints
}

func (s *EndpointSlice) rareParts() *rareParts {
	if s.rare == nil {
		s.rare = &rareParts{}
	}
	return s.rare
}

// SlicePort is one port of an EndpointSlice, with the API's defaults
// applied: no name is "", no protocol TCP.
type SlicePort struct {
	Name     string
	Protocol v1.Protocol
	// Port is the port number, when HasPort (the API allows a port-less
	// slice).
	Port    int32
	HasPort bool
}

// sliceEndpoint is one endpoint of an EndpointSlice: its first address, its
// conditions (each set or not), its node name (shared with every endpoint
// naming the same node) and its hints. 16 bytes: every node caches every
// endpoint of the cluster, and at 32 they were 16 MB at 50,000 Services
// of 10.
type sliceEndpoint struct {
	node *string
	// addr is an IPv4 address's 4 bytes, or the index of an IPv6 one in
	// the slice's addrs6, or of a text in its texts (the kind is in bits).
	addr [4]byte
	// bits packs the address kind and the three conditions in the low 8
	// bits (flags), and above them 1 + the index of the endpoint's hints
	// in the slice's, 0 when it has none.
	bits uint32
}

// noTrigger is EndpointSlice.trigger when the slice has no trigger time:
// the earliest time a trigger could name, long before any tracker began,
// so one equal to it is not observed either way.
const noTrigger = math.MinInt64

const hintsShift = 8

// flags are the address kind and the conditions.
func (e *sliceEndpoint) flags() uint8 { return uint8(e.bits) }

// hints is 1 + the index of the endpoint's hints in the slice's, 0 for none.
func (e *sliceEndpoint) hints() uint32 { return e.bits >> hintsShift }

type moreAddresses struct {
	endpoint  int
	addresses []string
}

// sliceHints are one endpoint's topology hints; nil lists when none.
type sliceHints struct {
	zones, nodes []string
}

// maxSliceHints is how many distinct hints a slice keeps apart: the index
// has the 24 bits above the flags.
const maxSliceHints = 1<<(32-hintsShift) - 1

// The address kinds of an endpoint (flags' low two bits).
const (
	addrNone = iota // the endpoint lists no address
	addrIPv4
	addrIPv6
	addrText // kept as written: not an IP address, or one with a zone
	addrMask = 3
)

// A condition is a tri-state of two bits: unset, false or true; ready's
// bits follow the address kind's, then serving's, then terminating's.
const (
	condUnset = iota
	condFalse
	condTrue

	readyShift       = 2
	servingShift     = 4
	terminatingShift = 6
)

// CompactEndpointSlice keeps what the proxier reads of s. It is the one
// conversion: the daemon's informer transform makes every cached slice with
// it, and the tracker converts slices handed to it as API objects (tests,
// inspect).
func CompactEndpointSlice(s *discovery.EndpointSlice) *EndpointSlice {
	out := &EndpointSlice{
		Namespace:   namespaces.internString(s.Namespace),
		Name:        s.Name,
		identity:    newIdentity(s.UID, s.ResourceVersion),
		ServiceName: sharedPrefix(s.Labels[discovery.LabelServiceName], s.Name),
		trigger:     noTrigger,
		AddressType: discovery.AddressType(knownString(string(s.AddressType), string(discovery.AddressTypeIPv4), string(discovery.AddressTypeIPv6), string(discovery.AddressTypeFQDN))),
	}
	// Kept as the metric reads it (a slice changed before the tracker began
	// is the tracker's to leave out: ChangeTracker.triggerTime).
	if t, ok, _ := networkProgrammingTrigger(s, false, time.Time{}); ok {
		out.trigger = t.UnixNano()
	}
	if len(s.Ports) > 0 {
		out.Ports = make([]SlicePort, len(s.Ports))
		for i, p := range s.Ports {
			out.Ports[i] = SlicePort{Name: deref(p.Name, ""), Protocol: v1.Protocol(knownString(string(deref(p.Protocol, v1.ProtocolTCP)), string(v1.ProtocolTCP), string(v1.ProtocolUDP), string(v1.ProtocolSCTP)))}
			if p.Port != nil {
				out.Ports[i].Port, out.Ports[i].HasPort = *p.Port, true
			}
		}
	}
	if len(s.Endpoints) > 0 {
		out.Endpoints = make([]sliceEndpoint, len(s.Endpoints))
	}
	for i := range s.Endpoints {
		ep := &s.Endpoints[i]
		e := &out.Endpoints[i]
		e.bits = uint32(tri(ep.Conditions.Ready)<<readyShift | tri(ep.Conditions.Serving)<<servingShift | tri(ep.Conditions.Terminating)<<terminatingShift)
		e.node = nodeNames.intern(ep.NodeName)
		if len(ep.Addresses) > 0 {
			out.setAddress(e, ep.Addresses[0])
			if len(ep.Addresses) > 1 {
				out.rareParts().more = append(out.rareParts().more, moreAddresses{endpoint: i, addresses: append([]string(nil), ep.Addresses[1:]...)})
			}
		}
		if ep.Hints != nil {
			e.bits |= out.hintsIndex(ep.Hints) << hintsShift
		}
	}
	return out
}

// compactEndpointSlices converts each slice (tests build API objects).
func compactEndpointSlices(list []*discovery.EndpointSlice) []*EndpointSlice {
	out := make([]*EndpointSlice, len(list))
	for i, s := range list {
		out[i] = CompactEndpointSlice(s)
	}
	return out
}

func tri(p *bool) uint8 {
	switch {
	case p == nil:
		return condUnset
	case *p:
		return condTrue
	}
	return condFalse
}

// setAddress keeps text as 16 bytes when it is an IP address without a
// zone (unmapped, as every reader takes it), else as written.
func (s *EndpointSlice) setAddress(e *sliceEndpoint, text string) {
	a, err := netip.ParseAddr(text)
	switch {
	case err != nil || a.Zone() != "":
		r := s.rareParts()
		binary.LittleEndian.PutUint32(e.addr[:], uint32(len(r.texts)))
		r.texts = append(r.texts, text)
		e.bits |= addrText
	case a.Unmap().Is4():
		e.addr = a.Unmap().As4()
		e.bits |= addrIPv4
	default:
		if s.addrs6 == nil {
			// An IPv6 slice's addresses are all IPv6: room for each.
			s.addrs6 = make([][16]byte, 0, len(s.Endpoints))
		}
		binary.LittleEndian.PutUint32(e.addr[:], uint32(len(s.addrs6)))
		s.addrs6 = append(s.addrs6, a.As16())
		e.bits |= addrIPv6
	}
}

// sharedPrefix is label, sharing the memory of name when name begins with
// it: the EndpointSlice controller names a Service's slices after it
// ("<service>-<random>"), so the service-name label costs no copy of its
// own.
func sharedPrefix(label, name string) string {
	if strings.HasPrefix(name, label) {
		return name[:len(label)]
	}
	return label
}

// hintsIndex is 1 + the index of h among the slice's distinct hints, which
// it adds to when new.
func (s *EndpointSlice) hintsIndex(h *discovery.EndpointHints) uint32 {
	var kept sliceHints
	for _, z := range h.ForZones {
		kept.zones = append(kept.zones, zoneNames.internString(z.Name))
	}
	for _, n := range h.ForNodes {
		kept.nodes = append(kept.nodes, nodeNames.internString(n.Name))
	}
	r := s.rareParts()
	for i, o := range r.hints {
		if slices.Equal(o.zones, kept.zones) && slices.Equal(o.nodes, kept.nodes) {
			return uint32(i) + 1
		}
	}
	if len(r.hints) >= maxSliceHints {
		// Past 2^24 distinct hints (no slice the API server takes has
		// 1,001 endpoints) one more is not kept apart: the last one kept
		// stands for it.
		return uint32(len(r.hints))
	}
	r.hints = append(r.hints, kept)
	return uint32(len(r.hints))
}

// knownString is the constant among known equal to s, so that the
// slices share it, else s.
func knownString(s string, known ...string) string {
	for _, k := range known {
		if s == k {
			return k
		}
	}
	return s
}

// Address is the endpoint's first address: the parsed address (ok), or the
// text as written when it is no IP address or carries a zone (ok false,
// text set), or neither when the endpoint lists none.
func (s *EndpointSlice) Address(i int) (addr netip.Addr, text string, ok bool) {
	e := &s.Endpoints[i]
	switch e.flags() & addrMask {
	case addrIPv4:
		return netip.AddrFrom4(e.addr), "", true
	case addrIPv6:
		return netip.AddrFrom16(s.addrs6[binary.LittleEndian.Uint32(e.addr[:])]), "", true
	case addrText:
		return netip.Addr{}, s.rare.texts[binary.LittleEndian.Uint32(e.addr[:])], false
	}
	return netip.Addr{}, "", false
}

// HasAddress is false for an endpoint that lists no address.
func (e *sliceEndpoint) HasAddress() bool { return e.flags()&addrMask != addrNone }

// addressText is the endpoint's first address as the API object had it
// (up to the form of an IPv6 address: it is printed canonically), "" when none.
func (s *EndpointSlice) addressText(i int) string {
	a, text, ok := s.Address(i)
	if ok {
		return a.String()
	}
	return text
}

// condition is the endpoint's condition at shift: set, and its value.
func (e *sliceEndpoint) condition(shift uint8) (value, set bool) {
	switch e.flags() >> shift & 3 {
	case condTrue:
		return true, true
	case condFalse:
		return false, true
	}
	return false, false
}

// Ready, Serving and Terminating are the endpoint's conditions with the
// EndpointSlice API's defaults for unset: ready and serving default to
// true, terminating to false.
func (e *sliceEndpoint) Ready() bool       { return e.conditionOr(readyShift, true) }
func (e *sliceEndpoint) Serving() bool     { return e.conditionOr(servingShift, true) }
func (e *sliceEndpoint) Terminating() bool { return e.conditionOr(terminatingShift, false) }

func (e *sliceEndpoint) conditionOr(shift uint8, def bool) bool {
	if v, set := e.condition(shift); set {
		return v
	}
	return def
}

// NodeName is the endpoint's node, "" when unset.
func (e *sliceEndpoint) NodeName() string { return deref(e.node, "") }

// Hints are the endpoint's zone and node hints (nil when none). The lists
// are shared: callers only read them.
func (s *EndpointSlice) Hints(i int) (zones, nodes []string) {
	if h := s.Endpoints[i].hints(); h != 0 {
		return s.rare.hints[h-1].zones, s.rare.hints[h-1].nodes
	}
	return nil, nil
}

// MoreAddresses are every endpoint's second and later addresses, as
// written.
func (s *EndpointSlice) MoreAddresses() []string {
	var out []string
	if s.rare == nil {
		return nil
	}
	for _, m := range s.rare.more {
		out = append(out, m.addresses...)
	}
	return out
}

// MoreAddressesOf is endpoint i's second and later addresses, as written.
func (s *EndpointSlice) MoreAddressesOf(i int) []string {
	if s.rare == nil {
		return nil
	}
	for _, m := range s.rare.more {
		if m.endpoint == i {
			return m.addresses
		}
	}
	return nil
}

// GetObjectMeta is the slice's identity as metadata, so that meta.Accessor,
// and the informer's key functions and store with it, take the slice:
// namespace, name, UID and resource version. The store asks for it several
// times per event, so it carries no label or annotation maps (objectMeta
// has them); changing the result changes nothing of the slice.
func (s *EndpointSlice) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: s.identity.UID(), ResourceVersion: s.identity.ResourceVersion()}
}

// UID is the slice's metadata.uid.
func (s *EndpointSlice) UID() types.UID { return s.identity.UID() }

// TriggerTime is the slice's endpoints.kubernetes.io/last-change-trigger-time,
// false when it has none that parses.
func (s *EndpointSlice) TriggerTime() (time.Time, bool) {
	if s.trigger == noTrigger {
		return time.Time{}, false
	}
	return time.Unix(0, s.trigger).UTC(), true
}

// objectMeta is the slice's metadata as the API object had it: the
// identity, the service-name label and the trigger-time annotation.
func (s *EndpointSlice) objectMeta() *metav1.ObjectMeta {
	m := s.GetObjectMeta().(*metav1.ObjectMeta)
	if s.ServiceName != "" {
		m.Labels = map[string]string{discovery.LabelServiceName: s.ServiceName}
	}
	if t, ok := s.TriggerTime(); ok {
		m.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: t.Format(time.RFC3339Nano)}
	}
	return m
}

// ToDiscovery gives back the API object with what the slice kept (for
// tests, and for a person reading it): an address that parsed is printed
// canonically.
func (s *EndpointSlice) ToDiscovery() *discovery.EndpointSlice {
	out := &discovery.EndpointSlice{ObjectMeta: *s.objectMeta(), AddressType: s.AddressType}
	for _, p := range s.Ports {
		kept := discovery.EndpointPort{Name: ptrTo(p.Name), Protocol: ptrTo(p.Protocol)}
		if p.HasPort {
			kept.Port = ptrTo(p.Port)
		}
		out.Ports = append(out.Ports, kept)
	}
	var more []moreAddresses
	if s.rare != nil {
		more = s.rare.more
	}
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		ep := discovery.Endpoint{NodeName: e.node}
		if e.HasAddress() {
			ep.Addresses = []string{s.addressText(i)}
		}
		if len(more) > 0 && more[0].endpoint == i {
			ep.Addresses = append(ep.Addresses, more[0].addresses...)
			more = more[1:]
		}
		ep.Conditions.Ready, ep.Conditions.Serving, ep.Conditions.Terminating = e.conditionPtr(readyShift), e.conditionPtr(servingShift), e.conditionPtr(terminatingShift)
		if e.hints() != 0 {
			h := s.rare.hints[e.hints()-1]
			ep.Hints = &discovery.EndpointHints{}
			for _, z := range h.zones {
				ep.Hints.ForZones = append(ep.Hints.ForZones, discovery.ForZone{Name: z})
			}
			for _, n := range h.nodes {
				ep.Hints.ForNodes = append(ep.Hints.ForNodes, discovery.ForNode{Name: n})
			}
		}
		out.Endpoints = append(out.Endpoints, ep)
	}
	return out
}

func (e *sliceEndpoint) conditionPtr(shift uint8) *bool {
	if v, set := e.condition(shift); set {
		return ptrTo(v)
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }

// Node names, zone names and namespaces repeat across every slice of the
// cluster: the slices share one copy of each.
var (
	nodeNames  = &interner{max: 100_000}
	zoneNames  = &interner{max: 10_000}
	namespaces = &interner{max: 100_000}
)

// interner hands out one copy per distinct value, for up to max values (a
// cluster has one node name per node; the bound keeps hostile slices naming
// endless nodes from growing it without limit: past it values stay as
// decoded).
type interner struct {
	mu     sync.Mutex
	max    int
	values map[string]*string
}

// intern is the shared *string holding *p (nil for nil).
func (in *interner) intern(p *string) *string {
	if p == nil {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if q, ok := in.values[*p]; ok {
		return q
	}
	if in.values == nil {
		in.values = map[string]*string{}
	}
	if len(in.values) < in.max {
		// A copy: p's text may share its memory with a larger decoded
		// buffer, which the table must not keep alive.
		q := strings.Clone(*p)
		p = &q
		in.values[q] = p
	}
	return p
}

func (in *interner) internString(s string) string {
	return *in.intern(&s)
}

// Len is how many distinct values the interner holds.
func (in *interner) Len() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.values)
}
