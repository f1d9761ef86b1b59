package ipset

import (
	"net/netip"
	"slices"
	"testing"
)

// Every shape of member the owned sets hold, in both families, comes back
// from the packed form exactly; the ones that cannot (a zone, another
// protocol) are kept as they are. An entry is found, listed and removed
// under the entry it was put as and no other, with its value.
func TestEntryMapKeepsEveryEntryExactly(t *testing.T) {
	a4, b4 := netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("10.244.1.5")
	a6, b6 := netip.MustParseAddr("2001:db8:96::a"), netip.MustParseAddr("2001:db8:244:1::5")
	mapped := netip.AddrFrom16(a4.As16()) // ::ffff:10.96.0.10, not 10.96.0.10
	entries := []Entry{
		{IP: a4},
		{IP: a6},
		{IP: mapped},
		{IP: a4, Protocol: "tcp", Port: 80},
		{IP: a4, Protocol: "udp", Port: 80},
		{IP: a4, Protocol: "sctp", Port: 80},
		{IP: a6, Protocol: "tcp", Port: 443},
		{IP: a4, Protocol: "tcp", Port: 80, IP2: b4},
		{IP: a6, Protocol: "tcp", Port: 80, IP2: b6},
		{IP: a4, Protocol: "tcp", Port: 80, Net: netip.MustParsePrefix("198.51.100.0/24")},
		{IP: a6, Protocol: "tcp", Port: 80, Net: netip.MustParsePrefix("2001:db8:1::/64")},
		{IP: a4, Protocol: "tcp", Port: 80, Net: netip.MustParsePrefix("0.0.0.0/0")},
		{Net: netip.MustParsePrefix("10.96.0.0/16")},
		{Net: netip.MustParsePrefix("2001:db8:96::/112")},
		{Net: netip.PrefixFrom(b4, 16)}, // not masked: kept as given
		{Port: 30080},
		{Protocol: "tcp", Port: 30080},
		{IP: netip.MustParseAddr("fe80::1%eth0"), Protocol: "tcp", Port: 80}, // zoned: kept unpacked
		{IP: a4, Protocol: "icmp", Port: 0},                                  // no packed protocol: kept unpacked
		{IP: a4, Protocol: "tcp", Port: 80, IP2: b4, Net: netip.MustParsePrefix("198.51.100.0/24")},
	}
	s := NewEntryMap[int](0)
	for i, e := range entries {
		if s.Has(e) {
			t.Fatalf("entry %d %+v found before it was put", i, e)
		}
		s.Put(e, i)
		if v, ok := s.Get(e); !ok || v != i {
			t.Fatalf("entry %d %+v: got %d, %v after it was put", i, e, v, ok)
		}
	}
	if s.Len() != len(entries) {
		t.Fatalf("Len %d after putting %d distinct entries", s.Len(), len(entries))
	}
	// Only the last three do not pack: every shape the owned sets hold does.
	if len(s.other) != 3 {
		t.Errorf("%d entries kept unpacked (%+v), want the 3 that cannot pack", len(s.other), s.other)
	}
	// The IPv4 addresses alone or with a protocol and port take 8 bytes
	// each; an IPv4-mapped IPv6 address is not one of them.
	if len(s.v4) != 4 {
		t.Errorf("%d entries in 8 bytes (%+v), want the 4 IPv4 addresses with at most a protocol and port", len(s.v4), s.v4)
	}
	got := map[Entry]int{}
	for e, v := range s.All() {
		got[e] = v
	}
	for i, e := range entries {
		if v, ok := got[e]; !ok || v != i {
			t.Errorf("All() gave %+v as %d, %v; want %d", e, v, ok, i)
		}
	}
	if len(got) != len(entries) || len(slices.Collect(s.Keys())) != len(entries) {
		t.Errorf("All() listed %d entries, Keys() %d, want %d", len(got), len(slices.Collect(s.Keys())), len(entries))
	}
	for i, e := range entries {
		s.Delete(e)
		if s.Has(e) {
			t.Errorf("entry %d %+v still found after it was deleted", i, e)
		}
		if s.Len() != len(entries)-i-1 {
			t.Fatalf("Len %d after deleting %d of %d", s.Len(), i+1, len(entries))
		}
	}
	var none *EntryMap[bool] // a set the view does not hold
	if none.Has(entries[0]) || none.Len() != 0 || slices.Collect(none.Keys()) != nil {
		t.Error("a nil EntryMap has entries")
	}
	none.Delete(entries[0])
}

// EntriesNotIn yields exactly the entries of one map the other lacks,
// packed or not, each once; and it compares with the map the caller holds
// after each entry yielded, not the one it held at the start.
func TestEntriesNotInYieldsTheDifference(t *testing.T) {
	a4, b4 := netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("10.96.0.11")
	zoned, a6 := netip.MustParseAddr("fe80::1%eth0"), netip.MustParseAddr("2001:db8::a")
	m := NewEntryMap[int](0)
	in := NewEntryMap[struct{}](0)
	// Of each kind of key (IPv4 in 8 bytes, packed, kept as it is), one
	// in both maps and one in the first only.
	both := []Entry{{IP: a4, Protocol: "tcp", Port: 80}, {IP: a6, Protocol: "tcp", Port: 80}, {IP: zoned, Protocol: "tcp", Port: 80}}
	only := []Entry{{IP: b4, Protocol: "tcp", Port: 80}, {IP: a6, Protocol: "tcp", Port: 81}, {IP: zoned, Protocol: "udp", Port: 53}, {IP: a4, Protocol: "icmp"}}
	for _, e := range both {
		m.Put(e, 1)
		in.Put(e, struct{}{})
	}
	for _, e := range only {
		m.Put(e, 1)
	}
	in.Put(Entry{IP: b4, Protocol: "udp", Port: 80}, struct{}{}) // only in the other
	got := slices.Collect(EntriesNotIn(m, func() *EntryMap[struct{}] { return in }))
	if len(got) != len(only) {
		t.Fatalf("got %v, want %v", got, only)
	}
	for _, e := range only {
		if !slices.Contains(got, e) {
			t.Errorf("%+v missing from %v", e, got)
		}
	}
	if got := slices.Collect(EntriesNotIn(m, func() *EntryMap[struct{}] { return nil })); len(got) != len(both)+len(only) {
		t.Errorf("against nothing: %d entries, want all %d", len(got), len(both)+len(only))
	}
	var none *EntryMap[int]
	if got := slices.Collect(EntriesNotIn(none, func() *EntryMap[struct{}] { return in })); len(got) != 0 {
		t.Errorf("a nil map yielded %v", got)
	}
	// The caller's map holds all but one packed entry, and goes once that
	// one is yielded: every entry after it is then missing, the three
	// kept unpacked (listed after the packed ones) at least.
	current := NewEntryMap[struct{}](0)
	for e := range m.All() {
		current.Put(e, struct{}{})
	}
	current.Delete(only[0])
	var after []Entry
	for e := range EntriesNotIn(m, func() *EntryMap[struct{}] { return current }) {
		after = append(after, e)
		current = nil
	}
	if len(after) < 1+len(m.other) || after[0] != only[0] {
		t.Errorf("yielded %v once the map went, want %+v first and then every entry left (the map in hand asked again)", after, only[0])
	}
}
