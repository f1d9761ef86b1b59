package conntrack

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// The index selects exactly the flows some filter matches, whatever fields
// the filters set, duplicates included.
func TestFilterIndexSelectsWhatSomeFilterMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	addr := func() netip.Addr { return netip.AddrFrom4([4]byte{198, 51, 100, byte(rng.IntN(6))}) }
	port := func() uint16 { return uint16(53 + rng.IntN(3)) }
	protocols := []uint8{TCP, UDP}
	for round := range 200 {
		var filters []Filter
		for range 1 + rng.IntN(12) {
			f := Filter{}
			if rng.IntN(4) > 0 {
				f.Protocol = protocols[rng.IntN(2)]
			}
			if rng.IntN(4) > 0 {
				f.OrigDst = addr()
			}
			if rng.IntN(2) > 0 {
				f.OrigDstPort = port()
			}
			if rng.IntN(2) > 0 {
				f.ReplySrc = addr()
			}
			if rng.IntN(3) > 0 {
				f.ReplySrcPort = port()
			}
			filters = append(filters, f)
			if rng.IntN(5) == 0 {
				filters = append(filters, f)
			}
		}
		idx := newFilterIndex(filters)
		for range 300 {
			flow := Flow{Protocol: protocols[rng.IntN(2)],
				OrigSrc: netip.AddrPortFrom(netip.MustParseAddr("192.0.2.7"), 40000), OrigDst: netip.AddrPortFrom(addr(), port()),
				ReplySrc: netip.AddrPortFrom(addr(), port()), ReplyDst: netip.AddrPortFrom(netip.MustParseAddr("192.0.2.7"), 40000)}
			want := false
			for _, f := range filters {
				want = want || f.Matches(flow)
			}
			if got := idx.matches(flow); got != want {
				t.Fatalf("round %d: flow %+v: index says %v, the filters %v\n%+v", round, flow, got, want, filters)
			}
		}
	}
}
