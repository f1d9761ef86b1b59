package proxier

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/ipset"
)

// Every shape of member the owned sets hold, in both families, comes back
// from the packed form exactly; the ones that cannot (a zone, another
// protocol) are kept as they are. A member is found, listed and removed
// under the entry it was added as and no other.
func TestSetMembersKeepEveryEntryExactly(t *testing.T) {
	a4, b4 := netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("10.244.1.5")
	a6, b6 := netip.MustParseAddr("2001:db8:96::a"), netip.MustParseAddr("2001:db8:244:1::5")
	mapped := netip.AddrFrom16(a4.As16()) // ::ffff:10.96.0.10, not 10.96.0.10
	entries := []ipset.Entry{
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
	s := newSetMembers(0)
	for i, e := range entries {
		if s.has(e) {
			t.Fatalf("entry %d %+v found before it was added", i, e)
		}
		s.add(e)
		if !s.has(e) {
			t.Fatalf("entry %d %+v not found after it was added", i, e)
		}
	}
	if s.len() != len(entries) {
		t.Fatalf("len %d after adding %d distinct entries", s.len(), len(entries))
	}
	// Only the last three do not pack: every shape the owned sets hold does.
	if len(s.other) != 3 {
		t.Errorf("%d entries kept unpacked (%+v), want the 3 that cannot pack", len(s.other), s.other)
	}
	got := slices.Collect(s.all())
	for _, e := range entries {
		if !slices.Contains(got, e) {
			t.Errorf("all() lacks %+v; it listed %+v", e, got)
		}
	}
	if len(got) != len(entries) {
		t.Errorf("all() listed %d members, want %d", len(got), len(entries))
	}
	for i, e := range entries {
		s.remove(e)
		if s.has(e) {
			t.Errorf("entry %d %+v still found after it was removed", i, e)
		}
		if s.len() != len(entries)-i-1 {
			t.Fatalf("len %d after removing %d of %d", s.len(), i+1, len(entries))
		}
	}
	var none *setMembers // a set the view does not hold
	if none.has(entries[0]) || none.len() != 0 || slices.Collect(none.all()) != nil {
		t.Error("a missing set has members")
	}
	none.remove(entries[0])
}
