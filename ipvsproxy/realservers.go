package ipvsproxy

import (
	"iter"
	"net/netip"
	"slices"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
)

// RealServerList is a virtual server's wanted real servers, sorted by
// address and port (CompareRealServerKeys), in 22 bytes each. The desired
// state holds every real server of the node for as long as the daemon runs:
// as ipvs.RealServer (a netip.Addr's 24 bytes, the port, the weight and the
// two connection counters the kernel reports, 48 bytes) 50,000 Services of
// ten endpoints held 23 MiB of them, as this 10.7. A list is never changed
// once built: the virtual servers of a Service port that serve the same
// endpoints share one (builder.realServers), and so does the proxier's
// kernel view while the kernel holds it.
type RealServerList []packedRealServer

// packedRealServer is one wanted real server. Endpoint addresses carry no
// zone (endpointslice.go refuses one), so 16 bytes and the family hold an
// address exactly.
type packedRealServer struct {
	addr   [16]byte
	port   uint16
	weight uint16
	is4    bool
}

func packRealServer(rs ipvs.RealServer) packedRealServer {
	return packedRealServer{addr: rs.Address.As16(), port: rs.Port, weight: uint16(rs.Weight), is4: rs.Address.Is4()}
}

// Key is the real server's address and port.
func (p packedRealServer) Key() ipvs.RealServerKey {
	a := netip.AddrFrom16(p.addr)
	if p.is4 {
		a = a.Unmap()
	}
	return ipvs.RealServerKey{Address: a, Port: p.port}
}

// RealServer is the real server as the IPVS adapter writes it.
func (p packedRealServer) RealServer() ipvs.RealServer {
	return ipvs.RealServer{RealServerKey: p.Key(), Weight: int32(p.weight)}
}

// NewRealServerList packs rss, sorted the desired state's way.
func NewRealServerList(rss ...ipvs.RealServer) RealServerList {
	l := make(RealServerList, 0, len(rss))
	for _, rs := range rss {
		l = append(l, packRealServer(rs))
	}
	l.sort()
	return l
}

// sort puts l in the order the kernel view keeps (internal/proxier), which
// Find, Equal and the writer's diff rely on.
func (l RealServerList) sort() {
	slices.SortFunc(l, func(a, b packedRealServer) int { return CompareRealServerKeys(a.Key(), b.Key()) })
}

// At is the i-th real server.
func (l RealServerList) At(i int) ipvs.RealServer { return l[i].RealServer() }

// All yields each real server in order.
func (l RealServerList) All() iter.Seq2[int, ipvs.RealServer] {
	return func(yield func(int, ipvs.RealServer) bool) {
		for i := range l {
			if !yield(i, l[i].RealServer()) {
				return
			}
		}
	}
}

// Find is the real server at k.
func (l RealServerList) Find(k ipvs.RealServerKey) (ipvs.RealServer, bool) {
	i, ok := slices.BinarySearchFunc(l, k, func(p packedRealServer, k ipvs.RealServerKey) int {
		return CompareRealServerKeys(p.Key(), k)
	})
	if !ok {
		return ipvs.RealServer{}, false
	}
	return l[i].RealServer(), true
}

// Contains reports whether the list holds a real server at k.
func (l RealServerList) Contains(k ipvs.RealServerKey) bool {
	_, ok := l.Find(k)
	return ok
}

// Equal reports whether the list is exactly rss (sorted the same way), at
// their weights.
func (l RealServerList) Equal(rss []ipvs.RealServer) bool {
	if len(l) != len(rss) {
		return false
	}
	for i := range l {
		if l[i].Key() != rss[i].RealServerKey || int32(l[i].weight) != rss[i].Weight {
			return false
		}
	}
	return true
}
