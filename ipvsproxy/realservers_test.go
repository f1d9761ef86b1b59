package ipvsproxy

import (
	"net/netip"
	"testing"
	"unsafe"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// The desired state holds every real server of the node for as long as the
// daemon runs (500,000 at 50,000 Services of ten endpoints): a wanted real
// server is 22 bytes, so ten fit the 224-byte size class where ten
// ipvs.RealServers took 480.
func TestWantedRealServerStaysPacked(t *testing.T) {
	var vs VirtualServerState
	if size := unsafe.Sizeof(vs.RealServers[0]); size > 22 {
		t.Errorf("a wanted real server is %d bytes, want at most 22", size)
	}
}

// A packed real server gives back exactly the address, port and weight it
// was made of, of either family, an IPv4-mapped IPv6 address staying IPv6;
// the list is in the order the kernel view keeps (CompareRealServerKeys).
func TestRealServerListKeepsWhatItWasGiven(t *testing.T) {
	rs := func(addr string, port uint16, weight int32) ipvs.RealServer {
		return ipvs.RealServer{RealServerKey: ipvs.RealServerKey{Address: netip.MustParseAddr(addr), Port: port}, Weight: weight}
	}
	in := []ipvs.RealServer{rs("2001:db8::7", 443, 1), rs("192.0.2.10", 8080, 0), rs("::ffff:192.0.2.10", 8080, 65535), rs("192.0.2.10", 80, 1), rs("198.51.100.1", 1, 7)}
	l := NewRealServerList(in...)
	want := []ipvs.RealServer{in[3], in[1], in[4], in[2], in[0]}
	if !l.Equal(want) {
		t.Fatalf("list = %v, want %v", l, want)
	}
	for i, got := range l.All() {
		if got != want[i] || l.At(i) != want[i] {
			t.Errorf("real server %d = %+v, want %+v", i, got, want[i])
		}
		if found, ok := l.Find(want[i].RealServerKey); !ok || found != want[i] {
			t.Errorf("Find(%v) = %+v, %v", want[i].RealServerKey, found, ok)
		}
		if !got.Address.Is4() && !got.Address.Is6() {
			t.Errorf("real server %d has no address", i)
		}
	}
	if got := l.At(3).Address; !got.Is4In6() {
		t.Errorf("an IPv4-mapped IPv6 real server came back as %v", got)
	}
	if l.Contains(rs("192.0.2.11", 8080, 1).RealServerKey) || l.Contains(rs("192.0.2.10", 81, 1).RealServerKey) {
		t.Error("Contains finds a real server the list does not hold")
	}
	changed := []ipvs.RealServer{in[3], in[1], in[4], rs("::ffff:192.0.2.10", 8080, 65536+65535), in[0]}
	if l.Equal(changed) {
		t.Error("a weight the kernel holds above 65535 compares equal to the wanted one")
	}
	if l.Equal(want[:4]) {
		t.Error("a shorter list compares equal")
	}
}

// The virtual servers of a port that serve the same endpoints (the cluster
// IP, each node port, a load balancer IP under Cluster policy) share one
// list; a port whose external policy is Local has a list of its own for
// the external addresses.
func TestVirtualServersOfOnePortShareTheirRealServers(t *testing.T) {
	node := NodeInfo{Name: servicetest.ThisNode, Addresses: []netip.Addr{servicetest.Node1IP, netip.MustParseAddr("192.0.2.1")}}
	build := func(svc *v1.Service) *ServiceState {
		slices := compactEndpointSlices([]*discovery.EndpointSlice{servicetest.Slice(svc, svc.Name+"-a", 8080, "10.244.1.5@"+servicetest.ThisNode, "10.244.2.7@node2")})
		return BuildService(svc, slices, node, testConfig())
	}
	backing := func(vs VirtualServerState) *packedRealServer { return &vs.RealServers[0] }

	st := build(servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140")))
	if len(st.VirtualServers) != 4 {
		t.Fatalf("want the cluster IP, two node ports and the load balancer IP, got %d virtual servers:\n%s", len(st.VirtualServers), dumpService(st))
	}
	for _, vs := range st.VirtualServers[1:] {
		if len(vs.RealServers) != 2 || backing(vs) != backing(st.VirtualServers[0]) {
			t.Errorf("%s %s does not share the cluster IP's list of real servers", vs.Kind, vs.VirtualServerKey)
		}
	}

	st = build(servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140"), servicetest.ExternalLocal(32122)))
	var cluster *VirtualServerState
	for i, vs := range st.VirtualServers {
		if vs.Kind == KindClusterIP {
			cluster = &st.VirtualServers[i]
		}
	}
	if cluster == nil || len(cluster.RealServers) != 2 {
		t.Fatalf("want a cluster IP with both endpoints:\n%s", dumpService(st))
	}
	for _, vs := range st.VirtualServers {
		if vs.Kind != KindClusterIP && (len(vs.RealServers) != 1 || backing(vs) == backing(*cluster)) {
			t.Errorf("%s %s under Local policy: want its own list of this node's endpoint, got %v", vs.Kind, vs.VirtualServerKey, unpacked(vs.RealServers))
		}
	}
}
