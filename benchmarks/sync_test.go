// Package benchmarks measures the proxier's sync on the kernel fakes, in
// process, through the same Sync the daemon runs: a full sync of a cluster
// of N Services, and a partial sync after one endpoint changes in it.
package benchmarks

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/iptables"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/ipvsproxy/ipvsproxy/netif"
	"github.com/ipvsproxy/ipvsproxy/sysctl"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

const endpointsPerService = 10

func newProxier(b *testing.B) *ipvsproxy.Proxier {
	b.Helper()
	links := netif.NewFake(ipvsproxy.DummyInterface)
	links.SetHostAddresses(netip.MustParseAddr("198.51.100.1"))
	k := ipvsproxy.Kernel{
		IPVS: ipvs.NewFake(), Netif: links, IPSet: ipset.NewFake(),
		IPTables:  map[v1.IPFamily]iptables.Interface{v1.IPv4Protocol: iptables.NewFake(iptables.IPv4)},
		Conntrack: conntrack.NewFake(), Sysctl: sysctl.NewFake(nil),
	}
	cfg := ipvsproxy.DefaultConfig()
	cfg.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	p, err := ipvsproxy.New(cfg, "node1", k, nil)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// service i gets cluster IP 10.96.x.y, a node port, and endpoints on two nodes.
func world(i int) (*v1.Service, *discovery.EndpointSlice) {
	name := fmt.Sprintf("svc-%d", i)
	ip := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, ClusterIP: ip.String(), ClusterIPs: []string{ip.String()},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, NodePort: int32(30000 + i%2768)}}},
	}
	return svc, slice(svc, i, endpointsPerService)
}

func slice(svc *v1.Service, i, n int) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "bench", Name: svc.Name + "-a", Labels: map[string]string{discovery.LabelServiceName: svc.Name}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: ptr(v1.ProtocolTCP)}},
	}
	for e := 0; e < n; e++ {
		node := []string{"node1", "node2"}[e%2]
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{
			Addresses: []string{netip.AddrFrom4([4]byte{10, 244, byte(i >> 4), byte(i%16*16 + e)}).String()},
			NodeName:  &node,
		})
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func load(p *ipvsproxy.Proxier, services int) {
	for i := 0; i < services; i++ {
		svc, s := world(i)
		p.Tracker().SetService(svc)
		p.Tracker().SetEndpointSlice(s)
	}
}

// BenchmarkFullSync: start-up of a node in a cluster of N Services.
func BenchmarkFullSync(b *testing.B) {
	klog.SetLogger(discardLogger())
	for _, n := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				p := newProxier(b)
				load(p, n)
				b.StartTimer()
				if res := p.Sync(); res.Err() != nil {
					b.Fatal(res.Err())
				}
			}
		})
	}
}

// BenchmarkPartialSync: one endpoint changes in a cluster of N Services;
// the cost should not grow with N.
func BenchmarkPartialSync(b *testing.B) {
	klog.SetLogger(discardLogger())
	for _, n := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			p := newProxier(b)
			load(p, n)
			if res := p.Sync(); res.Err() != nil {
				b.Fatal(res.Err())
			}
			svc, _ := world(n / 2)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p.Tracker().SetEndpointSlice(slice(svc, n/2, endpointsPerService-1-i%2))
				if res := p.Sync(); res.Err() != nil || res.Full {
					b.Fatalf("full=%v err=%v", res.Full, res.Err())
				}
			}
		})
	}
}
