package ipvsproxy

import (
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	v1 "k8s.io/api/core/v1"
)

// The desired state holds one VirtualServerState per virtual server of the
// node (50,000 at 50,000 ClusterIP Services): a Service's one fits a
// 192-byte object, where with the kind as a string and the routed range as
// a netip.Prefix it took 240.
func TestVirtualServerStateStaysCompact(t *testing.T) {
	if size := unsafe.Sizeof(VirtualServerState{}); size > 184 {
		t.Errorf("VirtualServerState is %d bytes, want at most 184", size)
	}
}

// So does one ServiceState per Service: 128 bytes, where the creation time
// as a time.Time made it 144.
func TestServiceStateStaysCompact(t *testing.T) {
	if size := unsafe.Sizeof(ServiceState{}); size > 128 {
		t.Errorf("ServiceState is %d bytes, want at most 128", size)
	}
}

// The creation time orders Services when two want one virtual server;
// the state gives it back as the Service had it, the zero time included.
func TestServiceStateKeepsItsCreationTime(t *testing.T) {
	node := NodeInfo{Name: servicetest.ThisNode, Addresses: []netip.Addr{servicetest.Node1IP}}
	for _, created := range []time.Time{servicetest.Created, servicetest.Created.Add(-time.Hour + time.Nanosecond), {}} {
		svc := servicetest.Service("web", "10.96.0.10", servicetest.CreatedAt(created))
		if got := BuildService(svc, nil, node, testConfig()).Created(); !got.Equal(created) {
			t.Errorf("created %v, kept %v", created, got)
		}
	}
}

// A cluster IP in a routed Service CIDR names that range, of either
// family and any length; one outside every routed range names none.
func TestVirtualServerStateNamesItsRoutedRange(t *testing.T) {
	ranges := []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00:96::/112"), netip.MustParsePrefix("10.97.3.4/32")}
	node := NodeInfo{Name: servicetest.ThisNode, Addresses: []netip.Addr{servicetest.Node1IP}, RoutedServiceCIDRs: ranges}
	cfg := testConfig()
	cfg.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	for ip, want := range map[string]netip.Prefix{"10.96.200.7": ranges[0], "fd00:96::ab": ranges[1], "10.97.3.4": ranges[2], "10.98.0.1": {}} {
		st := BuildService(servicetest.Service("web", ip), nil, node, cfg)
		if len(st.VirtualServers) != 1 {
			t.Fatalf("%s: want one virtual server:\n%s", ip, dumpService(st))
		}
		vs := &st.VirtualServers[0]
		if got := vs.RoutedBy(); got != want {
			t.Errorf("%s: routed by %v, want %v", ip, got, want)
		}
		if vs.Bound == want.IsValid() {
			t.Errorf("%s: bound %v with routed range %v", ip, vs.Bound, want)
		}
		if vs.Kind.String() != "ClusterIP" {
			t.Errorf("%s: kind %q", ip, vs.Kind)
		}
	}
}

// And one claim per virtual server: two pointers and the rank.
func TestClaimStaysCompact(t *testing.T) {
	if size := unsafe.Sizeof(claim{}); size > 24 {
		t.Errorf("claim is %d bytes, want at most 24", size)
	}
}
