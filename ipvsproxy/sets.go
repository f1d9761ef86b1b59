package ipvsproxy

import (
	"iter"
	"net/netip"
	"slices"

	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
)

// SetEntry is one member the desired state wants in one set.
type SetEntry struct {
	Set   string
	Entry ipset.Entry
}

// Key is a comparable identity of the entry within its set.
func (e SetEntry) Key() SetEntryKey {
	return SetEntryKey{Set: e.Set, Entry: e.Entry}
}

type SetEntryKey struct {
	Set   string
	Entry ipset.Entry
}

// setEntries are the members one virtual server wants, sorted (normalize),
// kept packed: a SetEntry is 120 bytes (a set name and an ipset.Entry with
// two addresses, a prefix and a protocol string), and every virtual server
// has one or two (a cluster IP's KUBE-CLUSTER-IP and KUBE-IPVS-SERVICES
// members: 12 MB at 50,000 Services). A member is its owned set's index,
// its address, protocol and port in 24 bytes; one that does not pack (a
// second address or a prefix, a set the proxier does not own, a zone) is
// kept whole beside.
type setEntries []packedSetEntry

type packedSetEntry struct {
	ip    [16]byte
	port  uint16
	set   uint8 // index in packedSetNames
	proto uint8 // index in packedProtocols
	flags uint8
	whole *SetEntry // a member that does not pack; the rest is empty
}

const (
	packedHasIP uint8 = 1 << iota
	packedIPv4
)

var (
	packedProtocols = [...]string{"", "tcp", "udp", "sctp"}
	// packedSetNames are the owned sets of both families; packedSetIndex
	// finds one by name. Fixed at start, so the builders running in
	// parallel read them without a lock.
	packedSetNames []string
	packedSetIndex = map[string]uint8{}
)

func init() {
	for _, s := range owned.Sets([]v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}, 0) {
		if _, ok := packedSetIndex[s.Name]; !ok && len(packedSetNames) < 255 {
			packedSetIndex[s.Name] = uint8(len(packedSetNames))
			packedSetNames = append(packedSetNames, s.Name)
		}
	}
}

// Add adds e (normalize sorts and drops repeats).
func (es *setEntries) Add(e SetEntry) { *es = append(*es, pack(e)) }

// Len is how many members there are.
func (es setEntries) Len() int { return len(es) }

// All yields every member, unpacked.
func (es setEntries) All() iter.Seq[SetEntry] {
	return func(yield func(SetEntry) bool) {
		for i := range es {
			if !yield(es[i].unpack()) {
				return
			}
		}
	}
}

// normalize sorts the members as CompareSetEntries does, without repeats.
func (es *setEntries) normalize() {
	slices.SortFunc(*es, func(a, b packedSetEntry) int { return CompareSetEntries(a.unpack(), b.unpack()) })
	*es = slices.CompactFunc(*es, func(a, b packedSetEntry) bool { return a.unpack() == b.unpack() })
}

func pack(e SetEntry) packedSetEntry {
	set, known := packedSetIndex[e.Set]
	proto := slices.Index(packedProtocols[:], e.Entry.Protocol)
	if !known || proto < 0 || e.Entry.IP2.IsValid() || e.Entry.Net.IsValid() || e.Entry.IP.Zone() != "" {
		whole := e
		return packedSetEntry{whole: &whole}
	}
	p := packedSetEntry{port: e.Entry.Port, set: set, proto: uint8(proto)}
	if e.Entry.IP.IsValid() {
		p.ip, p.flags = e.Entry.IP.As16(), packedHasIP
		if e.Entry.IP.Is4() {
			p.flags |= packedIPv4
		}
	}
	return p
}

func (p packedSetEntry) unpack() SetEntry {
	if p.whole != nil {
		return *p.whole
	}
	e := SetEntry{Set: packedSetNames[p.set], Entry: ipset.Entry{Protocol: packedProtocols[p.proto], Port: p.port}}
	if p.flags&packedHasIP != 0 {
		e.Entry.IP = netip.AddrFrom16(p.ip)
		if p.flags&packedIPv4 != 0 {
			e.Entry.IP = e.Entry.IP.Unmap()
		}
	}
	return e
}

// Equal says whether both hold the same members in the same order (go-cmp
// compares with it).
func (es setEntries) Equal(o setEntries) bool {
	return slices.EqualFunc(es, o, func(a, b packedSetEntry) bool { return a.unpack() == b.unpack() })
}
