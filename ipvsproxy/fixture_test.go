package ipvsproxy

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/iptables"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"github.com/ipvsproxy/ipvsproxy/listeners"
	"github.com/ipvsproxy/ipvsproxy/netif"
	"github.com/ipvsproxy/ipvsproxy/sysctl"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
)

// The fixed address plan of the tests: nodes 198.51.100.1 (this node,
// "node1") and 198.51.100.2, service IPs in 10.96.0.0/16 (inside the
// fakes only), pods in 10.244.0.0/16, external and LB IPs in 203.0.113.0/24.
const thisNode = "node1"

var (
	node1IP  = netip.MustParseAddr("198.51.100.1")
	node1IP6 = netip.MustParseAddr("2001:db8::1")
)

// fakeKernel holds the fakes of one node.
type fakeKernel struct {
	ipvs      *ipvs.Fake
	netif     *netif.Fake
	ipset     *ipset.Fake
	ipt4      *iptables.Fake
	ipt6      *iptables.Fake
	conntrack *conntrack.Fake
	sysctl    *sysctl.Fake
	listeners *listeners.Fake
}

func newFakeKernel() *fakeKernel {
	fk := &fakeKernel{
		ipvs:      ipvs.NewFake(),
		netif:     netif.NewFake(owned.DummyInterface),
		ipset:     ipset.NewFake(),
		ipt4:      iptables.NewFake(iptables.IPv4),
		ipt6:      iptables.NewFake(iptables.IPv6),
		conntrack: conntrack.NewFake(),
		listeners: listeners.NewFake(),
		sysctl: sysctl.NewFake(map[string]string{
			"net.ipv4.vs.conntrack": "0", "net.ipv4.vs.expire_nodest_conn": "0",
			"net.ipv4.vs.expire_quiescent_template": "0", "net.ipv4.ip_forward": "0",
			"net.ipv4.vs.conn_reuse_mode": "1", "net.ipv4.conf.all.arp_ignore": "0",
			"net.ipv4.conf.all.arp_announce": "0", "net.ipv6.conf.all.forwarding": "0",
		}),
	}
	fk.netif.SetHostAddresses(netip.MustParseAddr("127.0.0.1"), node1IP, node1IP6, netip.MustParseAddr("fe80::1"))
	return fk
}

func (fk *fakeKernel) kernel() Kernel {
	return Kernel{
		IPVS: fk.ipvs, Netif: fk.netif, IPSet: fk.ipset,
		IPTables:  map[v1.IPFamily]iptables.Interface{v1.IPv4Protocol: fk.ipt4, v1.IPv6Protocol: fk.ipt6},
		Conntrack: fk.conntrack, Sysctl: fk.sysctl, Listeners: fk.listeners,
	}
}

func (fk *fakeKernel) writes() int {
	return fk.ipvs.Writes() + fk.netif.Writes() + fk.ipset.Writes() + fk.ipt4.Writes + fk.ipt6.Writes
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	return cfg
}

// newTestProxier returns a proxier on fk with a recorder that keeps events.
func newTestProxier(t *testing.T, fk *fakeKernel, cfg Config) (*Proxier, *record.FakeRecorder) {
	t.Helper()
	rec := record.NewFakeRecorder(100)
	p, err := New(cfg, thisNode, fk.kernel(), rec)
	if err != nil {
		t.Fatal(err)
	}
	p.Tracker().SetService(apiServerService())
	return p, rec
}

// apiServerService stands for default/kubernetes, present in every live
// cluster: without it the proxier deletes nothing (emptyworld.go). Headless
// here, so that it adds nothing to the kernel the tests look at.
func apiServerService() *v1.Service {
	return service(APIServerService.Name, v1.ClusterIPNone)
}

func mustSync(t *testing.T, p *Proxier) SyncResult {
	t.Helper()
	res := p.Sync()
	if err := res.Err(); err != nil {
		t.Fatalf("sync failed: %v", err)
	}
	return res
}

// svcOpt edits a Service under construction.
type svcOpt func(*v1.Service)

var created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func service(name, clusterIP string, opts ...svcOpt) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeClusterIP,
			ClusterIP:  clusterIP,
			ClusterIPs: []string{clusterIP},
			Ports:      []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func nodePort(port int32) svcOpt {
	return func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = port
	}
}

func loadBalancer(nodePort_ int32, ips ...string) svcOpt {
	return func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = nodePort_
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip})
		}
	}
}

func externalLocal(healthPort int32) svcOpt {
	return func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = healthPort
	}
}

func protocol(p v1.Protocol) svcOpt {
	return func(s *v1.Service) { s.Spec.Ports[0].Protocol = p }
}

func createdAt(t time.Time) svcOpt {
	return func(s *v1.Service) { s.CreationTimestamp = metav1.NewTime(t) }
}

// ep describes an endpoint: "10.244.1.5@node1", with optional conditions
// after a slash: "10.244.1.5@node1/notready", "/terminating" (serving,
// terminating, not ready), "/zone=a".
func slice(svc *v1.Service, name string, port int32, eps ...string) *discovery.EndpointSlice {
	family := discovery.AddressTypeIPv4
	if len(eps) > 0 && strings.Contains(strings.Split(eps[0], "@")[0], ":") {
		family = discovery.AddressTypeIPv6
	}
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: name,
			Labels: map[string]string{discovery.LabelServiceName: svc.Name}},
		AddressType: family,
		Ports:       []discovery.EndpointPort{{Name: ptr(svc.Spec.Ports[0].Name), Port: ptr(port), Protocol: ptr(svc.Spec.Ports[0].Protocol)}},
	}
	for _, spec := range eps {
		parts := strings.Split(spec, "/")
		addr, node, _ := strings.Cut(parts[0], "@")
		e := discovery.Endpoint{Addresses: []string{addr}, NodeName: ptr(node),
			Conditions: discovery.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)}}
		for _, c := range parts[1:] {
			switch {
			case c == "notready":
				e.Conditions = discovery.EndpointConditions{Ready: ptr(false), Serving: ptr(false), Terminating: ptr(false)}
			case c == "terminating":
				e.Conditions = discovery.EndpointConditions{Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)}
			case strings.HasPrefix(c, "zone="):
				if e.Hints == nil {
					e.Hints = &discovery.EndpointHints{}
				}
				e.Hints.ForZones = append(e.Hints.ForZones, discovery.ForZone{Name: c[len("zone="):]})
			default:
				panic(fmt.Sprintf("bad endpoint spec %q", spec))
			}
		}
		s.Endpoints = append(s.Endpoints, e)
	}
	return s
}

func ptr[T any](v T) *T { return &v }
