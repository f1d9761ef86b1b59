package ipvsproxy

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/ipvs"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// hugeService has 1,000 ports and 100 external IPs: 100,000 virtual servers
// and as many KUBE-IPVS-SERVICES entries, beyond the kernel's 65,536.
func hugeService() *v1.Service {
	svc := service("huge", "10.96.1.1", createdAt(created.Add(1)))
	svc.Spec.Ports = nil
	for p := 0; p < 1000; p++ {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: fmt.Sprintf("p%d", p), Port: int32(1000 + p),
			Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)})
	}
	for i := 0; i < 100; i++ {
		svc.Spec.ExternalIPs = append(svc.Spec.ExternalIPs, fmt.Sprintf("203.0.113.%d", i+1))
	}
	return svc
}

func TestServiceOverflowingASetIsRefusedAndOthersKeepWorking(t *testing.T) {
	fk := newFakeKernel()
	p, rec := newTestProxier(t, fk, testConfig())
	web := service("web", "10.96.0.80")
	p.Tracker().SetService(web)
	p.Tracker().SetEndpointSlice(slice(web, "web-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)

	huge := hugeService()
	p.Tracker().SetService(huge)
	p.Tracker().SetEndpointSlice(slice(huge, "huge-a", 8080, "10.244.1.6@node1"))
	other := service("other", "10.96.0.81", createdAt(created.Add(2)))
	p.Tracker().SetService(other)
	p.Tracker().SetEndpointSlice(slice(other, "other-a", 8080, "10.244.1.7@node1"))
	res := p.Sync()
	if err := res.Err(); err != nil {
		t.Fatalf("sync with an oversized Service failed: %v", err)
	}

	// The oversized Service is refused with an Event naming the set: of the
	// sets it overflows (KUBE-EXTERNAL-IP, KUBE-IPVS-SERVICES), the first by name.
	events := drainEvents(rec)
	if !strings.Contains(events, "ServiceTooLarge") || !strings.Contains(events, "KUBE-EXTERNAL-IP") {
		t.Errorf("events %q, want a ServiceTooLarge warning naming KUBE-EXTERNAL-IP", events)
	}
	vss, _ := fk.ipvs.VirtualServers()
	for _, vs := range vss {
		if vs.Address == netip.MustParseAddr("10.96.1.1") || strings.HasPrefix(vs.Address.String(), "203.0.113.") {
			t.Fatalf("virtual server %s of the refused Service was programmed", vs.VirtualServerKey)
		}
	}
	// ...and every other Service, older or newer, is fully programmed.
	for _, name := range []string{"10.96.0.80", "10.96.0.81"} {
		key := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr(name), Port: 80}
		if rss, err := fk.ipvs.RealServers(key); err != nil || len(rss) != 1 {
			t.Errorf("%s: real servers %v, %v; want its one endpoint", key, rss, err)
		}
		entries, _ := fk.ipset.Entries(setIPVSServices)
		if !strings.Contains(fmt.Sprint(entries), name) {
			t.Errorf("%s missing from %s", name, setIPVSServices)
		}
	}
	// A full sync keeps it that way, and shrinking the Service admits it.
	p.needFull = true
	if res := p.Sync(); res.Err() != nil {
		t.Fatalf("full sync: %v", res.Err())
	}
	huge.Spec.ExternalIPs = huge.Spec.ExternalIPs[:1]
	p.Tracker().SetService(huge)
	mustSync(t, p)
	key := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("203.0.113.1"), Port: 1999}
	if _, err := fk.ipvs.RealServers(key); err != nil {
		t.Errorf("after shrinking to 1,000 ports x 1 external IP, %s is not programmed: %v", key, err)
	}
}

// twentyThousandEndpoints is one slice of 20,000 ready endpoints, half of
// them on this node.
func twentyThousandEndpoints(svc *v1.Service) *discovery.EndpointSlice {
	var eps []string
	for n := 0; n < 20000; n++ {
		i := n + 1
		node := []string{"node1", "node2"}[n%2]
		eps = append(eps, fmt.Sprintf("10.%d.%d.%d@%s", 244+i>>16, (i>>8)&255, i&255, node))
	}
	return slice(svc, svc.Name+"-a", 8080, eps...)
}

func TestServiceWithTwentyThousandEndpoints(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	svc := service("big", "10.96.0.90", nodePort(30090))
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(twentyThousandEndpoints(svc))
	mustSync(t, p)
	for _, key := range []ipvs.VirtualServerKey{
		{Protocol: ipvs.TCP, Address: netip.MustParseAddr("10.96.0.90"), Port: 80},
		{Protocol: ipvs.TCP, Address: node1IP, Port: 30090},
	} {
		if rss, err := fk.ipvs.RealServers(key); err != nil || len(rss) != 20000 {
			t.Errorf("%s: %d real servers, %v; want 20000", key, len(rss), err)
		}
	}
	// Local endpoints reaching themselves are masqueraded: 10,000 hairpin entries.
	if entries, _ := fk.ipset.Entries(setLoopBack); len(entries) != 10000 {
		t.Errorf("%s holds %d entries, want 10000", setLoopBack, len(entries))
	}
}

// BenchmarkBuildServiceTwentyThousandEndpoints: one rebuild of a Service
// with 20,000 endpoints (union() was quadratic: 0.73 s per port).
func BenchmarkBuildServiceTwentyThousandEndpoints(b *testing.B) {
	svc := service("big", "10.96.0.90", nodePort(30090))
	slices := []*discovery.EndpointSlice{twentyThousandEndpoints(svc)}
	node := NodeInfo{Name: thisNode, Addresses: []netip.Addr{node1IP}}
	cfg := testConfig()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if st := BuildService(svc, slices, node, cfg); len(st.VirtualServers) != 2 {
			b.Fatalf("%d virtual servers", len(st.VirtualServers))
		}
	}
}
