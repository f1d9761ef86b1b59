package ipvsproxy

import (
	"net/netip"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzBuildService feeds arbitrary Services and EndpointSlices to the
// builder: it must never panic, and everything it emits must be accepted by
// the kernel fakes (which refuse what the kernel refuses).
func FuzzBuildService(f *testing.F) {
	f.Add("10.96.0.10", "TCP", int32(80), int32(30080), "203.0.113.5", "203.0.113.140", "10.244.1.5", "IPv4", int32(8080), byte(0))
	f.Add("fd00::10", "UDP", int32(53), int32(0), "2001:db8::5", "", "fd00::5", "IPv6", int32(53), byte(7))
	f.Add("10.96.0.300", "ICMP", int32(70000), int32(-1), "bogus", "::ffff:203.0.113.9", "10.244.1.5", "IPv6", int32(0), byte(255))
	f.Add("None", "SCTP", int32(9999), int32(31999), "", "", "10.0.0.1", "FQDN", int32(9999), byte(3))
	f.Fuzz(func(t *testing.T, clusterIP, proto string, port, nodePort_ int32, externalIP, lbIP, endpoint, addressType string, targetPort int32, flags byte) {
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "fuzz", Name: "svc"},
			Spec: v1.ServiceSpec{
				Type:        []v1.ServiceType{v1.ServiceTypeClusterIP, v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer, v1.ServiceTypeExternalName}[flags%4],
				ClusterIP:   clusterIP,
				ClusterIPs:  []string{clusterIP, endpoint},
				ExternalIPs: []string{externalIP, clusterIP},
				Ports: []v1.ServicePort{
					{Name: "a", Port: port, Protocol: v1.Protocol(proto), NodePort: nodePort_},
					{Name: "b", Port: targetPort, Protocol: v1.ProtocolUDP, NodePort: nodePort_},
				},
				LoadBalancerSourceRanges: []string{externalIP + "/24", lbIP},
			},
			Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: lbIP}, {IP: externalIP}}}},
		}
		if flags&4 != 0 {
			svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			svc.Spec.HealthCheckNodePort = nodePort_
		}
		if flags&8 != 0 {
			svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &targetPort}}
		}
		node := []string{servicetest.ThisNode, "other"}[flags>>7]
		endpointSlices := []*discovery.EndpointSlice{{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "fuzz", Name: "s", Labels: map[string]string{discovery.LabelServiceName: "svc"}},
			AddressType: discovery.AddressType(addressType),
			Ports: []discovery.EndpointPort{
				{Name: servicetest.Ptr("a"), Port: &targetPort, Protocol: servicetest.Ptr(v1.Protocol(proto))},
				{Name: servicetest.Ptr("b"), Port: &port, Protocol: servicetest.Ptr(v1.ProtocolUDP)},
			},
			Endpoints: []discovery.Endpoint{
				{Addresses: []string{endpoint}, NodeName: &node, Conditions: discovery.EndpointConditions{Ready: servicetest.Ptr(flags&16 != 0), Serving: servicetest.Ptr(flags&32 != 0), Terminating: servicetest.Ptr(flags&64 != 0)}},
				{Addresses: []string{endpoint}, NodeName: servicetest.Ptr(servicetest.ThisNode)},
				{Addresses: []string{clusterIP}},
			},
		}}
		cfg := testConfig()
		cfg.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
		info := NodeInfo{Name: servicetest.ThisNode, Addresses: []netip.Addr{servicetest.Node1IP, servicetest.Node1IP6}}
		st := BuildService(svc, compactEndpointSlices(endpointSlices), info, cfg)
		applyToFakes(t, st, cfg)
	})
}

// applyToFakes writes st into fresh kernel fakes and fails on any refusal.
func applyToFakes(t *testing.T, st *ServiceState, cfg Config) {
	t.Helper()
	h, links, sets := ipvs.NewFake(), netif.NewFake(owned.DummyInterface), ipset.NewFake()
	for _, vs := range st.VirtualServers {
		if err := h.AddVirtualServer(vs.VirtualServer); err != nil {
			t.Fatalf("kernel would refuse: %v", err)
		}
		for _, rs := range vs.RealServers.All() {
			if err := h.AddRealServer(vs.VirtualServerKey, rs); err != nil {
				t.Fatalf("kernel would refuse: %v", err)
			}
		}
	}
	if err := links.EnsureDummy(); err != nil {
		t.Fatal(err)
	}
	for _, a := range st.Addresses {
		if err := links.AddDummyAddress(a); err != nil {
			t.Fatalf("kernel would refuse: %v", err)
		}
	}
	for _, s := range owned.Sets(cfg.Families, cfg.IPSetMaxElements) {
		if err := sets.CreateSet(s); err != nil {
			t.Fatalf("kernel would refuse set %s: %v", s.Name, err)
		}
	}
	for e := range st.SetEntryKeys() {
		if err := sets.AddEntry(e.Set, e.Entry); err != nil {
			t.Fatalf("kernel would refuse: %v", err)
		}
	}
}
