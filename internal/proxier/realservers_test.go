package proxier

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
)

func rsAt(addr string, port uint16, weight int32) ipvs.RealServer {
	return ipvs.RealServer{RealServerKey: ipvs.RealServerKey{Address: netip.MustParseAddr(addr), Port: port}, Weight: weight}
}

// The kernel lists real servers in its own order; the view keeps them in
// the desired state's, and put, get and remove keep that order.
func TestRealServerListKeepsTheDesiredOrder(t *testing.T) {
	l := newRealServerList([]ipvs.RealServer{rsAt("10.244.2.9", 80, 1), rsAt("10.244.1.5", 8080, 1), rsAt("10.244.1.5", 80, 1), rsAt("fd00::1", 80, 1)})
	l.put(rsAt("10.244.1.7", 80, 1))   // inserted in the middle
	l.put(rsAt("10.244.1.5", 8080, 0)) // replaced
	l.put(rsAt("fd00::2", 80, 1))      // appended
	l.remove(rsAt("10.244.2.9", 80, 0).RealServerKey)
	l.remove(rsAt("192.0.2.1", 80, 0).RealServerKey) // absent: no-op
	want := []ipvs.RealServer{rsAt("10.244.1.5", 80, 1), rsAt("10.244.1.5", 8080, 0), rsAt("10.244.1.7", 80, 1), rsAt("fd00::1", 80, 1), rsAt("fd00::2", 80, 1)}
	if !slices.Equal(l, want) {
		t.Fatalf("list = %v, want %v", l, want)
	}
	if rs, ok := l.get(want[1].RealServerKey); !ok || rs.Weight != 0 {
		t.Errorf("get(%v) = %v, %v", want[1].RealServerKey, rs, ok)
	}
	if _, ok := l.get(rsAt("10.244.2.9", 80, 0).RealServerKey); ok {
		t.Error("a removed real server is still found")
	}
	// The desired state sorts by address and port the same way.
	desired := ipvsproxy.NewRealServerList(rsAt("10.244.1.5", 8080, 1), rsAt("10.244.1.5", 80, 1), rsAt("10.244.0.1", 9, 1), rsAt("fd00::1", 80, 1))
	byAddrPort := slices.Collect(func(yield func(ipvs.RealServer) bool) {
		for _, rs := range desired.All() {
			if !yield(rs) {
				return
			}
		}
	})
	if !slices.IsSortedFunc(byAddrPort, func(a, b ipvs.RealServer) int {
		return netip.AddrPortFrom(a.Address, a.Port).Compare(netip.AddrPortFrom(b.Address, b.Port))
	}) {
		t.Errorf("the desired list is not in address and port order: %v", byAddrPort)
	}
	for _, rs := range byAddrPort {
		if !desired.Contains(rs.RealServerKey) {
			t.Errorf("Contains(%v) = false on the desired state's order", rs.RealServerKey)
		}
	}
	if !desired.Equal(newRealServerList(slices.Clone(byAddrPort))) {
		t.Error("the desired list is not Equal to the same real servers as the view holds them")
	}
}
