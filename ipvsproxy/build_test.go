package ipvsproxy

import (
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// dumpService renders one Service's state: its share of the kernel, its
// health check and its problems.
func dumpService(st *ServiceState) string {
	d := NewDesiredState()
	d.set(st.Name, st, NewTouched())
	var b strings.Builder
	b.WriteString(d.Dump())
	if st.HealthCheckNodePort != 0 {
		b.WriteString("health check node port: ")
		b.WriteString(strconv.Itoa(int(st.HealthCheckNodePort)))
		b.WriteString(" local ready endpoints: " + strconv.Itoa(st.LocalReadyEndpoints) + "\n")
	}
	for _, p := range st.Problems {
		b.WriteString("problem: " + p.String() + "\n")
	}
	return b.String()
}

func TestBuildServiceGolden(t *testing.T) {
	node := NodeInfo{Name: servicetest.ThisNode, Zone: "zone-a", Addresses: []netip.Addr{
		netip.MustParseAddr("127.0.0.1"), servicetest.Node1IP, netip.MustParseAddr("192.0.2.1"), servicetest.Node1IP6, netip.MustParseAddr("fe80::1")}}
	dual := testConfig()
	dual.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	narrowed := testConfig()
	narrowed.NodePortAddresses = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	guarded := testConfig()
	guarded.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}
	guarded.ExternalIPCIDRs = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/25"), netip.MustParsePrefix("192.0.2.0/24")}
	guardedNode := node
	guardedNode.PodCIDRs = []netip.Prefix{netip.MustParsePrefix("10.250.1.0/24")}
	guardedNode.ClusterIPs = map[netip.Addr][]types.NamespacedName{
		netip.MustParseAddr("192.0.2.77"): {{Namespace: "other", Name: "victim"}},
		netip.MustParseAddr("10.96.0.10"): {{Namespace: "default", Name: "web"}},
	}
	excluded := testConfig()
	excluded.ExcludeCIDRs = []netip.Prefix{netip.MustParsePrefix("203.0.113.128/25")}

	type tc struct {
		name   string
		svc    *v1.Service
		slices func(*v1.Service) []*discovery.EndpointSlice
		cfg    Config
		node   *NodeInfo // nil: node
	}
	two := func(svc *v1.Service) []*discovery.EndpointSlice {
		return []*discovery.EndpointSlice{servicetest.Slice(svc, svc.Name+"-a", 8080, "10.244.1.5@node1", "10.244.2.7@node2")}
	}
	cases := []tc{
		{name: "clusterip", svc: servicetest.Service("web", "10.96.0.10"), slices: two},
		{name: "nodeport-cluster", svc: servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080)), slices: two},
		{name: "nodeport-narrowed", svc: servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080)), slices: two, cfg: narrowed},
		{name: "nodeport-local", svc: servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080), func(s *v1.Service) {
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		}), slices: two},
		{name: "loadbalancer-cluster", svc: servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140")), slices: two},
		{name: "loadbalancer-local", svc: servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140"), servicetest.ExternalLocal(32122)), slices: two},
		{name: "loadbalancer-local-no-local-endpoint", svc: servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140"), servicetest.ExternalLocal(32122)),
			slices: func(svc *v1.Service) []*discovery.EndpointSlice {
				return []*discovery.EndpointSlice{servicetest.Slice(svc, "lb-a", 8080, "10.244.2.7@node2")}
			}},
		{name: "loadbalancer-proxy-ipmode-and-source-ranges", svc: servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140", "203.0.113.141"), func(s *v1.Service) {
			s.Status.LoadBalancer.Ingress[1].IPMode = servicetest.Ptr(v1.LoadBalancerIPModeProxy)
			s.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24", " 192.0.2.0/25 ", "not-a-cidr"}
		}), slices: two},
		{name: "loadbalancer-node-address", svc: servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "198.51.100.1"), func(s *v1.Service) {
			s.Spec.ExternalIPs = []string{"192.0.2.1"}
		}), slices: two},
		{name: "loadbalancer-source-ranges-allow-all", cfg: dual, svc: servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140", "2001:db8:1::140"), func(s *v1.Service) {
			s.Spec.ClusterIPs = []string{"10.96.0.20", "fd00:96::20"}
			s.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24", "0.0.0.0/0", "::/0"}
		}), slices: two},
		{name: "loadbalancer-source-ranges-no-node-address", svc: servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140"), func(s *v1.Service) {
			s.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
		}), slices: two},
		{name: "external-ips", svc: servicetest.Service("web", "10.96.0.10", func(s *v1.Service) {
			s.Spec.ExternalIPs = []string{"203.0.113.5", "203.0.113.200", "2001:db8::5", "bogus"}
		}), slices: two, cfg: excluded},
		// --ipvs-exclude-cidrs limits clean-up, not what a Service gets
		// (as kube-proxy): every virtual server is built.
		{name: "excluded-cluster-ip", svc: servicetest.Service("lb", "203.0.113.130", servicetest.LoadBalancer(30090, "203.0.113.140")), slices: two, cfg: excluded},
		// The CVE-2020-8554 guard: only 203.0.113.5 is
		// served; each other external IP gets its reason.
		{name: "external-ip-guard", svc: servicetest.Service("web", "10.96.0.10", func(s *v1.Service) {
			s.Spec.ExternalIPs = []string{"203.0.113.5", "203.0.113.200", "192.0.2.77", "10.96.5.5", "10.244.2.10", "10.250.1.7"}
		}), slices: two, cfg: guarded, node: &guardedNode},
		// The same guard for ingress IPs a load balancer controller
		// wrote, but --external-ip-cidrs (203.0.113.200 is served).
		{name: "loadbalancer-ip-guard", svc: servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090,
			"203.0.113.140", "203.0.113.200", "192.0.2.77", "10.96.5.5", "10.244.2.10", "10.250.1.7")), slices: two, cfg: guarded, node: &guardedNode},
		{name: "session-affinity", svc: servicetest.Service("web", "10.96.0.10", func(s *v1.Service) {
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: servicetest.Ptr(int32(600))}}
		}), slices: two},
		{name: "internal-traffic-local", svc: servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080), func(s *v1.Service) {
			s.Spec.InternalTrafficPolicy = servicetest.Ptr(v1.ServiceInternalTrafficPolicyLocal)
		}), slices: two},
		{name: "terminating-fallback", svc: servicetest.Service("web", "10.96.0.10"), slices: func(svc *v1.Service) []*discovery.EndpointSlice {
			return []*discovery.EndpointSlice{servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1/terminating", "10.244.2.7@node2/notready")}
		}},
		{name: "ready-beats-terminating", svc: servicetest.Service("web", "10.96.0.10"), slices: func(svc *v1.Service) []*discovery.EndpointSlice {
			return []*discovery.EndpointSlice{servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1/terminating", "10.244.2.7@node2", "10.244.2.8@node2/notready")}
		}},
		{name: "topology-hints", svc: servicetest.Service("web", "10.96.0.10", func(s *v1.Service) {
			s.Spec.TrafficDistribution = servicetest.Ptr(v1.ServiceTrafficDistributionPreferClose)
		}), slices: func(svc *v1.Service) []*discovery.EndpointSlice {
			return []*discovery.EndpointSlice{servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1/zone=zone-a", "10.244.2.7@node2/zone=zone-b")}
		}},
		{name: "topology-hints-incomplete-ignored", svc: servicetest.Service("web", "10.96.0.10"), slices: func(svc *v1.Service) []*discovery.EndpointSlice {
			return []*discovery.EndpointSlice{servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1/zone=zone-a", "10.244.2.7@node2")}
		}},
		{name: "udp-and-sctp", svc: servicetest.Service("dns", "10.96.0.53", servicetest.Protocol(v1.ProtocolUDP), servicetest.NodePort(30053), func(s *v1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "sctp", Port: 9999, Protocol: v1.ProtocolSCTP, NodePort: 30999})
		}), slices: func(svc *v1.Service) []*discovery.EndpointSlice {
			return []*discovery.EndpointSlice{servicetest.Slice(svc, "dns-a", 53, "10.244.1.5@node1"), {
				ObjectMeta:  svcSliceMeta(svc, "dns-sctp"),
				AddressType: discovery.AddressTypeIPv4,
				Ports:       []discovery.EndpointPort{{Name: servicetest.Ptr("sctp"), Port: servicetest.Ptr(int32(9999)), Protocol: servicetest.Ptr(v1.ProtocolSCTP)}},
				Endpoints:   []discovery.Endpoint{{Addresses: []string{"10.244.1.5"}, NodeName: servicetest.Ptr("node1")}},
			}}
		}},
		{name: "dual-stack", cfg: dual, svc: servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080), func(s *v1.Service) {
			s.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:96::10"}
		}), slices: func(svc *v1.Service) []*discovery.EndpointSlice {
			return []*discovery.EndpointSlice{servicetest.Slice(svc, "web-v4", 8080, "10.244.1.5@node1"), servicetest.Slice(svc, "web-v6", 8080, "fd00:244:1::5@node1")}
		}},
		{name: "headless-ignored", svc: servicetest.Service("web", v1.ClusterIPNone), slices: two},
		{name: "externalname-ignored", svc: servicetest.Service("web", "", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeExternalName
			s.Spec.ExternalName = "example.invalid"
		}), slices: two},
		{name: "bad-input", svc: servicetest.Service("web", "10.96.0.10", func(s *v1.Service) {
			s.Spec.Ports = append(s.Spec.Ports,
				v1.ServicePort{Name: "big", Port: 70000, Protocol: v1.ProtocolTCP},
				v1.ServicePort{Name: "icmp", Port: 81, Protocol: "ICMP"},
				v1.ServicePort{Name: "again", Port: 80, Protocol: v1.ProtocolTCP})
		}), slices: func(svc *v1.Service) []*discovery.EndpointSlice {
			return []*discovery.EndpointSlice{
				servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1", "fd00::5@node1", "not-an-ip@node1", "10.244.1.5@node2"),
				servicetest.Slice(svc, "web-b", 8080, "10.244.2.7@node2"),
			}
		}},
		{name: "bad-cluster-ip", svc: servicetest.Service("web", "10.96.0.300"), slices: two},
		{name: "wrong-family-slice-skipped", svc: servicetest.Service("web", "10.96.0.10"), slices: func(svc *v1.Service) []*discovery.EndpointSlice {
			return []*discovery.EndpointSlice{servicetest.Slice(svc, "web-v6", 8080, "fd00::5@node1"), servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1")}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			if cfg.Scheduler == "" {
				cfg = testConfig()
			}
			n := node
			if c.node != nil {
				n = *c.node
			}
			st := BuildService(c.svc, compactEndpointSlices(c.slices(c.svc)), n, cfg)
			if st.Name != (types.NamespacedName{Namespace: "default", Name: c.svc.Name}) {
				t.Fatalf("name %v", st.Name)
			}
			again := BuildService(c.svc, compactEndpointSlices(c.slices(c.svc)), n, cfg)
			if dumpService(st) != dumpService(again) {
				t.Fatal("BuildService is not deterministic")
			}
			// The proxier builds what the compact Service gives back.
			compact := BuildService(CompactService(c.svc).ToService(), compactEndpointSlices(c.slices(c.svc)), n, cfg)
			if diff := cmp.Diff(st, compact, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
				cmp.Transformer("unpacked", unpacked), cmp.AllowUnexported(VirtualServerState{}, ServiceState{})); diff != "" {
				t.Errorf("BuildService (-API object +compact Service):\n%s", diff)
			}
			servicetest.CheckGolden(t, filepath.Join("testdata", "build", c.name+".golden"), dumpService(st))
		})
	}
}

func svcSliceMeta(svc *v1.Service, name string) (m metav1.ObjectMeta) {
	m.Namespace, m.Name = svc.Namespace, name
	m.Labels = map[string]string{discovery.LabelServiceName: svc.Name}
	return m
}

// testConfig is the configuration of the tests: the defaults with the
// address plan's pod network. internal/proxier's tests keep the same
// function: one shared helper would import this package, which these tests
// cannot import.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.ClusterCIDRs = []netip.Prefix{servicetest.PodCIDR}
	return cfg
}

// unpacked is l as the IPVS adapter takes it, for cmp to compare and show.
func unpacked(l RealServerList) []ipvs.RealServer {
	out := make([]ipvs.RealServer, 0, len(l))
	for _, rs := range l.All() {
		out = append(out, rs)
	}
	return out
}
