package proxier

import (
	"iter"
	"net/netip"

	"github.com/ipvsproxy/ipvsproxy/ipset"
)

// setMembers are the members of one owned set as the kernel view keeps
// them. The view holds every member of every owned set (at 10,000 Services
// about 20,000, each looked up on every full sync), and ipset.Entry as a
// map key is 104 bytes with a string to hash; a member here is 38 bytes of
// plain memory. An entry that would not come back the same (a zoned
// address, a protocol other than tcp, udp and sctp) is kept as it is.
type setMembers struct {
	packed map[setMember]struct{}
	other  map[ipset.Entry]struct{}
}

// setMember is an ipset.Entry packed: the addresses as 16 bytes each, the
// protocol as its index in memberProtocols, and which fields are set.
type setMember struct {
	ip, ip2 [16]byte
	port    uint16
	proto   uint8
	flags   uint8
	bits    uint8
}

// The flags of a setMember: which of the entry's addresses are valid and
// IPv4, and whether ip2 holds IP2 or the address of Net.
const (
	memberIP uint8 = 1 << iota
	memberIP4
	memberIP2
	memberIP24
	memberNet
)

var memberProtocols = [...]string{"", "tcp", "udp", "sctp"}

func newSetMembers(n int) *setMembers {
	return &setMembers{packed: make(map[setMember]struct{}, n)}
}

// packMember packs e; ok is false when the packed form would not unpack to
// e exactly.
func packMember(e ipset.Entry) (m setMember, ok bool) {
	proto := -1
	for i, p := range memberProtocols {
		if p == e.Protocol {
			proto = i
		}
	}
	if proto < 0 || e.IP2.IsValid() && e.Net.IsValid() {
		return m, false
	}
	m.proto, m.port = uint8(proto), e.Port
	if e.IP.IsValid() {
		m.ip, m.flags = e.IP.As16(), memberIP
		if e.IP.Is4() {
			m.flags |= memberIP4
		}
	}
	second := e.IP2
	if e.Net.IsValid() {
		second, m.bits, m.flags = e.Net.Addr(), uint8(e.Net.Bits()), m.flags|memberNet
	}
	if second.IsValid() {
		m.ip2, m.flags = second.As16(), m.flags|memberIP2
		if second.Is4() {
			m.flags |= memberIP24
		}
	}
	return m, m.entry() == e
}

// entry unpacks m.
func (m setMember) entry() ipset.Entry {
	addr := func(b [16]byte, valid, is4 uint8) netip.Addr {
		switch {
		case m.flags&valid == 0:
			return netip.Addr{}
		case m.flags&is4 != 0:
			return netip.AddrFrom16(b).Unmap()
		}
		return netip.AddrFrom16(b)
	}
	e := ipset.Entry{IP: addr(m.ip, memberIP, memberIP4), Protocol: memberProtocols[m.proto], Port: m.port}
	second := addr(m.ip2, memberIP2, memberIP24)
	if m.flags&memberNet != 0 {
		e.Net = netip.PrefixFrom(second, int(m.bits))
	} else {
		e.IP2 = second
	}
	return e
}

// has reports whether e is a member; a set the view does not hold (nil)
// has none.
func (s *setMembers) has(e ipset.Entry) bool {
	if s == nil {
		return false
	}
	if m, ok := packMember(e); ok {
		_, found := s.packed[m]
		return found
	}
	_, found := s.other[e]
	return found
}

func (s *setMembers) add(e ipset.Entry) {
	if m, ok := packMember(e); ok {
		s.packed[m] = struct{}{}
		return
	}
	if s.other == nil {
		s.other = map[ipset.Entry]struct{}{}
	}
	s.other[e] = struct{}{}
}

func (s *setMembers) remove(e ipset.Entry) {
	if s == nil {
		return
	}
	if m, ok := packMember(e); ok {
		delete(s.packed, m)
		return
	}
	delete(s.other, e)
}

func (s *setMembers) len() int {
	if s == nil {
		return 0
	}
	return len(s.packed) + len(s.other)
}

// all yields every member, in no order.
func (s *setMembers) all() iter.Seq[ipset.Entry] {
	return func(yield func(ipset.Entry) bool) {
		if s == nil {
			return
		}
		for m := range s.packed {
			if !yield(m.entry()) {
				return
			}
		}
		for e := range s.other {
			if !yield(e) {
				return
			}
		}
	}
}
