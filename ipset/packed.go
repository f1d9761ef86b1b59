package ipset

import (
	"iter"
	"net/netip"
)

// EntryMap is a map keyed by Entry that keeps its keys packed. An Entry as
// a map key is 104 bytes with a string to hash; the proxier keeps every
// member of every owned set in such maps (at 10,000 Services about 20,000,
// each looked up on every full sync), where a packed key is 38 bytes of
// plain memory. An entry that would not unpack the same (a zoned address, a
// protocol other than tcp, udp and sctp, both IP2 and Net) is kept as it
// is. Reads of a nil EntryMap find nothing.
type EntryMap[V any] struct {
	// v4 holds the commonest member, an IPv4 address alone or with a
	// protocol and port (every member of an IPv4 cluster's address sets), in
	// 8 bytes: at 10,000 Services the two maps of every member (the desired
	// state's and the kernel's) take 3 MB less than as packed entries.
	v4     map[uint64]V
	packed map[packedEntry]V
	other  map[Entry]V
	// room is the size NewEntryMap was asked for, given to the first map
	// an entry goes to: a set's members are of one family, so they go
	// (almost) all to one map.
	room int
}

// packedEntry is an Entry packed: the addresses as 16 bytes each, the
// protocol as its index in packedProtocols, and which fields are set.
type packedEntry struct {
	ip, ip2 [16]byte
	port    uint16
	proto   uint8
	flags   uint8
	bits    uint8
}

// The flags of a packedEntry: which of the entry's addresses are valid and
// IPv4, and whether ip2 holds IP2 or the address of Net.
const (
	packedIP uint8 = 1 << iota
	packedIP4
	packedIP2
	packedIP24
	packedNet
)

var packedProtocols = [...]string{"", "tcp", "udp", "sctp"}

// NewEntryMap is an empty EntryMap with room for n entries.
func NewEntryMap[V any](n int) *EntryMap[V] {
	return &EntryMap[V]{room: n}
}

// makeMap is a map with the room m has left.
func makeMap[K comparable, V any](room *int) map[K]V {
	n := *room
	*room = 0
	return make(map[K]V, n)
}

// pack4 packs e into 8 bytes when it is an IPv4 address with at most a
// protocol and a port: the address in the high 32 bits, then the port, then
// the protocol's index in packedProtocols.
func pack4(e Entry) (uint64, bool) {
	if !e.IP.Is4() || e.IP2 != (netip.Addr{}) || e.Net != (netip.Prefix{}) {
		return 0, false
	}
	proto, known := protocolIndex(e.Protocol)
	if !known {
		return 0, false
	}
	a := e.IP.As4()
	return uint64(a[0])<<56 | uint64(a[1])<<48 | uint64(a[2])<<40 | uint64(a[3])<<32 | uint64(e.Port)<<16 | uint64(proto), true
}

// unpack4 is the entry pack4 packed into k.
func unpack4(k uint64) Entry {
	return Entry{
		IP:       netip.AddrFrom4([4]byte{byte(k >> 56), byte(k >> 48), byte(k >> 40), byte(k >> 32)}),
		Protocol: packedProtocols[k&0xff],
		Port:     uint16(k >> 16),
	}
}

// pack packs e; ok is false when the packed form would not unpack to e
// exactly.
func pack(e Entry) (p packedEntry, ok bool) {
	proto, known := protocolIndex(e.Protocol)
	if !known || e.IP2.IsValid() && e.Net.IsValid() {
		return p, false
	}
	p.proto, p.port = proto, e.Port
	if e.IP.IsValid() {
		p.ip, p.flags = e.IP.As16(), packedIP
		if e.IP.Is4() {
			p.flags |= packedIP4
		}
	}
	if e.Net == (netip.Prefix{}) && e.IP2 == (netip.Addr{}) && e.IP.Zone() == "" {
		// The common member (an address, protocol and port) always
		// unpacks the same: the round trip below, a fifth of a full
		// sync's set comparison, is not needed.
		return p, true
	}
	second := e.IP2
	if e.Net.IsValid() {
		second, p.bits, p.flags = e.Net.Addr(), uint8(e.Net.Bits()), p.flags|packedNet
	}
	if second.IsValid() {
		p.ip2, p.flags = second.As16(), p.flags|packedIP2
		if second.Is4() {
			p.flags |= packedIP24
		}
	}
	return p, p.entry() == e
}

// protocolIndex is name's index in packedProtocols.
func protocolIndex(name string) (uint8, bool) {
	for i, known := range packedProtocols {
		if name == known {
			return uint8(i), true
		}
	}
	return 0, false
}

// entry unpacks p.
func (p packedEntry) entry() Entry {
	addr := func(b [16]byte, valid, is4 uint8) netip.Addr {
		switch {
		case p.flags&valid == 0:
			return netip.Addr{}
		case p.flags&is4 != 0:
			return netip.AddrFrom16(b).Unmap()
		}
		return netip.AddrFrom16(b)
	}
	e := Entry{IP: addr(p.ip, packedIP, packedIP4), Protocol: packedProtocols[p.proto], Port: p.port}
	second := addr(p.ip2, packedIP2, packedIP24)
	if p.flags&packedNet != 0 {
		e.Net = netip.PrefixFrom(second, int(p.bits))
	} else {
		e.IP2 = second
	}
	return e
}

// Get is e's value and whether e is in m.
func (m *EntryMap[V]) Get(e Entry) (v V, ok bool) {
	if m == nil {
		return v, false
	}
	if k, ok4 := pack4(e); ok4 {
		v, ok = m.v4[k]
		return v, ok
	}
	if p, packed := pack(e); packed {
		v, ok = m.packed[p]
		return v, ok
	}
	v, ok = m.other[e]
	return v, ok
}

// Has reports whether e is in m.
func (m *EntryMap[V]) Has(e Entry) bool {
	_, ok := m.Get(e)
	return ok
}

// Put sets e's value.
func (m *EntryMap[V]) Put(e Entry, v V) {
	if k, ok := pack4(e); ok {
		if m.v4 == nil {
			m.v4 = makeMap[uint64, V](&m.room)
		}
		m.v4[k] = v
		return
	}
	if p, packed := pack(e); packed {
		if m.packed == nil {
			m.packed = makeMap[packedEntry, V](&m.room)
		}
		m.packed[p] = v
		return
	}
	if m.other == nil {
		m.other = makeMap[Entry, V](&m.room)
	}
	m.other[e] = v
}

// Delete removes e.
func (m *EntryMap[V]) Delete(e Entry) {
	if m == nil {
		return
	}
	if k, ok := pack4(e); ok {
		delete(m.v4, k)
		return
	}
	if p, packed := pack(e); packed {
		delete(m.packed, p)
		return
	}
	delete(m.other, e)
}

// Clear removes every entry, keeping the room they took.
func (m *EntryMap[V]) Clear() {
	clear(m.v4)
	clear(m.packed)
	clear(m.other)
}

// Len is the number of entries in m.
func (m *EntryMap[V]) Len() int {
	if m == nil {
		return 0
	}
	return len(m.v4) + len(m.packed) + len(m.other)
}

// All yields every entry with its value, in no order.
func (m *EntryMap[V]) All() iter.Seq2[Entry, V] {
	return func(yield func(Entry, V) bool) {
		if m == nil {
			return
		}
		for k, v := range m.v4 {
			if !yield(unpack4(k), v) {
				return
			}
		}
		for p, v := range m.packed {
			if !yield(p.entry(), v) {
				return
			}
		}
		for e, v := range m.other {
			if !yield(e, v) {
				return
			}
		}
	}
}

// Keys yields every entry, in no order.
func (m *EntryMap[V]) Keys() iter.Seq[Entry] {
	return func(yield func(Entry) bool) {
		for e := range m.All() {
			if !yield(e) {
				return
			}
		}
	}
}

// EntriesNotIn yields the entries of m that the map other returns lacks,
// comparing packed keys: no entry is unpacked but those yielded, and sets
// of 10,000 members that differ in a few differ in a few unpackings.
// other is asked again after each entry yielded: the caller may have
// replaced its map meanwhile. A nil map holds nothing.
func EntriesNotIn[V, W any](m *EntryMap[V], other func() *EntryMap[W]) iter.Seq[Entry] {
	return func(yield func(Entry) bool) {
		if m == nil {
			return
		}
		o := other()
		for k := range m.v4 {
			if o != nil {
				if _, ok := o.v4[k]; ok {
					continue
				}
			}
			if !yield(unpack4(k)) {
				return
			}
			o = other()
		}
		for p := range m.packed {
			if o != nil {
				if _, ok := o.packed[p]; ok {
					continue
				}
			}
			if !yield(p.entry()) {
				return
			}
			o = other()
		}
		for e := range m.other {
			if o.Has(e) {
				continue
			}
			if !yield(e) {
				return
			}
			o = other()
		}
	}
}
