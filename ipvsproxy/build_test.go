package ipvsproxy

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var update = flag.Bool("update", false, "rewrite golden files")

// dumpService renders one Service's state: its share of the kernel, its
// health check and its problems.
func dumpService(st *ServiceState) string {
	d := newDesiredState()
	d.set(st.Name, st, newTouched())
	var b strings.Builder
	b.WriteString(d.Dump())
	if st.HealthCheckNodePort != 0 {
		b.WriteString("health check node port: ")
		b.WriteString(itoa(int(st.HealthCheckNodePort)))
		b.WriteString(" local ready endpoints: " + itoa(st.LocalReadyEndpoints) + "\n")
	}
	for _, p := range st.Problems {
		b.WriteString("problem: " + p.String() + "\n")
	}
	return b.String()
}

func itoa(i int) string { return strconv.Itoa(i) }

// checkGolden compares got with testdata/build/NAME.golden; on mismatch it
// prints got whole, ready to paste (or run with -update).
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "build", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./ipvsproxy -run %s -update to create it); got:\n%s", err, t.Name(), got)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file %s; got:\n%s\nwant:\n%s", name, path, got, want)
	}
}

func TestBuildServiceGolden(t *testing.T) {
	node := NodeInfo{Name: thisNode, Zone: "zone-a", Addresses: []netip.Addr{
		netip.MustParseAddr("127.0.0.1"), node1IP, netip.MustParseAddr("192.0.2.1"), node1IP6, netip.MustParseAddr("fe80::1")}}
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
		return []*discovery.EndpointSlice{slice(svc, svc.Name+"-a", 8080, "10.244.1.5@node1", "10.244.2.7@node2")}
	}
	cases := []tc{
		{name: "clusterip", svc: service("web", "10.96.0.10"), slices: two},
		{name: "nodeport-cluster", svc: service("web", "10.96.0.10", nodePort(30080)), slices: two},
		{name: "nodeport-narrowed", svc: service("web", "10.96.0.10", nodePort(30080)), slices: two, cfg: narrowed},
		{name: "nodeport-local", svc: service("web", "10.96.0.10", nodePort(30080), func(s *v1.Service) {
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		}), slices: two},
		{name: "loadbalancer-cluster", svc: service("lb", "10.96.0.20", loadBalancer(30090, "203.0.113.140")), slices: two},
		{name: "loadbalancer-local", svc: service("lb", "10.96.0.20", loadBalancer(30090, "203.0.113.140"), externalLocal(32122)), slices: two},
		{name: "loadbalancer-local-no-local-endpoint", svc: service("lb", "10.96.0.20", loadBalancer(30090, "203.0.113.140"), externalLocal(32122)),
			slices: func(svc *v1.Service) []*discovery.EndpointSlice {
				return []*discovery.EndpointSlice{slice(svc, "lb-a", 8080, "10.244.2.7@node2")}
			}},
		{name: "loadbalancer-proxy-ipmode-and-source-ranges", svc: service("lb", "10.96.0.20", loadBalancer(30090, "203.0.113.140", "203.0.113.141"), func(s *v1.Service) {
			s.Status.LoadBalancer.Ingress[1].IPMode = ptr(v1.LoadBalancerIPModeProxy)
			s.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24", " 192.0.2.0/25 ", "not-a-cidr"}
		}), slices: two},
		{name: "loadbalancer-node-address", svc: service("lb", "10.96.0.20", loadBalancer(30090, "198.51.100.1"), func(s *v1.Service) {
			s.Spec.ExternalIPs = []string{"192.0.2.1"}
		}), slices: two},
		{name: "loadbalancer-source-ranges-allow-all", cfg: dual, svc: service("lb", "10.96.0.20", loadBalancer(30090, "203.0.113.140", "2001:db8:1::140"), func(s *v1.Service) {
			s.Spec.ClusterIPs = []string{"10.96.0.20", "fd00:96::20"}
			s.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24", "0.0.0.0/0", "::/0"}
		}), slices: two},
		{name: "loadbalancer-source-ranges-no-node-address", svc: service("lb", "10.96.0.20", loadBalancer(30090, "203.0.113.140"), func(s *v1.Service) {
			s.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
		}), slices: two},
		{name: "external-ips", svc: service("web", "10.96.0.10", func(s *v1.Service) {
			s.Spec.ExternalIPs = []string{"203.0.113.5", "203.0.113.200", "2001:db8::5", "bogus"}
		}), slices: two, cfg: excluded},
		// --ipvs-exclude-cidrs limits clean-up, not what a Service gets
		// (as kube-proxy): every virtual server is built.
		{name: "excluded-cluster-ip", svc: service("lb", "203.0.113.130", loadBalancer(30090, "203.0.113.140")), slices: two, cfg: excluded},
		// The CVE-2020-8554 guard: only 203.0.113.5 is
		// served; each other external IP gets its reason.
		{name: "external-ip-guard", svc: service("web", "10.96.0.10", func(s *v1.Service) {
			s.Spec.ExternalIPs = []string{"203.0.113.5", "203.0.113.200", "192.0.2.77", "10.96.5.5", "10.244.2.10", "10.250.1.7"}
		}), slices: two, cfg: guarded, node: &guardedNode},
		{name: "session-affinity", svc: service("web", "10.96.0.10", func(s *v1.Service) {
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr(int32(600))}}
		}), slices: two},
		{name: "internal-traffic-local", svc: service("web", "10.96.0.10", nodePort(30080), func(s *v1.Service) {
			s.Spec.InternalTrafficPolicy = ptr(v1.ServiceInternalTrafficPolicyLocal)
		}), slices: two},
		{name: "terminating-fallback", svc: service("web", "10.96.0.10"), slices: func(svc *v1.Service) []*discovery.EndpointSlice {
			return []*discovery.EndpointSlice{slice(svc, "web-a", 8080, "10.244.1.5@node1/terminating", "10.244.2.7@node2/notready")}
		}},
		{name: "ready-beats-terminating", svc: service("web", "10.96.0.10"), slices: func(svc *v1.Service) []*discovery.EndpointSlice {
			return []*discovery.EndpointSlice{slice(svc, "web-a", 8080, "10.244.1.5@node1/terminating", "10.244.2.7@node2", "10.244.2.8@node2/notready")}
		}},
		{name: "topology-hints", svc: service("web", "10.96.0.10", func(s *v1.Service) {
			s.Spec.TrafficDistribution = ptr(v1.ServiceTrafficDistributionPreferClose)
		}), slices: func(svc *v1.Service) []*discovery.EndpointSlice {
			return []*discovery.EndpointSlice{slice(svc, "web-a", 8080, "10.244.1.5@node1/zone=zone-a", "10.244.2.7@node2/zone=zone-b")}
		}},
		{name: "topology-hints-incomplete-ignored", svc: service("web", "10.96.0.10"), slices: func(svc *v1.Service) []*discovery.EndpointSlice {
			return []*discovery.EndpointSlice{slice(svc, "web-a", 8080, "10.244.1.5@node1/zone=zone-a", "10.244.2.7@node2")}
		}},
		{name: "udp-and-sctp", svc: service("dns", "10.96.0.53", protocol(v1.ProtocolUDP), nodePort(30053), func(s *v1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "sctp", Port: 9999, Protocol: v1.ProtocolSCTP, NodePort: 30999})
		}), slices: func(svc *v1.Service) []*discovery.EndpointSlice {
			return []*discovery.EndpointSlice{slice(svc, "dns-a", 53, "10.244.1.5@node1"), {
				ObjectMeta:  svcSliceMeta(svc, "dns-sctp"),
				AddressType: discovery.AddressTypeIPv4,
				Ports:       []discovery.EndpointPort{{Name: ptr("sctp"), Port: ptr(int32(9999)), Protocol: ptr(v1.ProtocolSCTP)}},
				Endpoints:   []discovery.Endpoint{{Addresses: []string{"10.244.1.5"}, NodeName: ptr("node1")}},
			}}
		}},
		{name: "dual-stack", cfg: dual, svc: service("web", "10.96.0.10", nodePort(30080), func(s *v1.Service) {
			s.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:96::10"}
		}), slices: func(svc *v1.Service) []*discovery.EndpointSlice {
			return []*discovery.EndpointSlice{slice(svc, "web-v4", 8080, "10.244.1.5@node1"), slice(svc, "web-v6", 8080, "fd00:244:1::5@node1")}
		}},
		{name: "headless-ignored", svc: service("web", v1.ClusterIPNone), slices: two},
		{name: "externalname-ignored", svc: service("web", "", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeExternalName
			s.Spec.ExternalName = "example.invalid"
		}), slices: two},
		{name: "bad-input", svc: service("web", "10.96.0.10", func(s *v1.Service) {
			s.Spec.Ports = append(s.Spec.Ports,
				v1.ServicePort{Name: "big", Port: 70000, Protocol: v1.ProtocolTCP},
				v1.ServicePort{Name: "icmp", Port: 81, Protocol: "ICMP"},
				v1.ServicePort{Name: "again", Port: 80, Protocol: v1.ProtocolTCP})
		}), slices: func(svc *v1.Service) []*discovery.EndpointSlice {
			return []*discovery.EndpointSlice{
				slice(svc, "web-a", 8080, "10.244.1.5@node1", "fd00::5@node1", "not-an-ip@node1", "10.244.1.5@node2"),
				slice(svc, "web-b", 8080, "10.244.2.7@node2"),
			}
		}},
		{name: "bad-cluster-ip", svc: service("web", "10.96.0.300"), slices: two},
		{name: "wrong-family-slice-skipped", svc: service("web", "10.96.0.10"), slices: func(svc *v1.Service) []*discovery.EndpointSlice {
			return []*discovery.EndpointSlice{slice(svc, "web-v6", 8080, "fd00::5@node1"), slice(svc, "web-a", 8080, "10.244.1.5@node1")}
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
			st := BuildService(c.svc, c.slices(c.svc), n, cfg)
			if st.Name != (types.NamespacedName{Namespace: "default", Name: c.svc.Name}) {
				t.Fatalf("name %v", st.Name)
			}
			again := BuildService(c.svc, c.slices(c.svc), n, cfg)
			if dumpService(st) != dumpService(again) {
				t.Fatal("BuildService is not deterministic")
			}
			checkGolden(t, c.name, dumpService(st))
		})
	}
}

func svcSliceMeta(svc *v1.Service, name string) (m metav1.ObjectMeta) {
	m.Namespace, m.Name = svc.Namespace, name
	m.Labels = map[string]string{discovery.LabelServiceName: svc.Name}
	return m
}
