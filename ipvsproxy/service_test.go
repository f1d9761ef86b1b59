package ipvsproxy

import (
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// serviceCorpus is every kind of Service the tests build (servicetest's
// options, the shapes of the proxier's and inspect's tests) and every case
// a reader tells apart: cluster IPs that parse, in canonical form or not,
// with a zone, "None", missing; every type and policy, set and unset, and
// unknown ones; ports without a protocol or out of range; external IPs,
// ingress IPs and source ranges good and bad; every form of the affinity
// configuration; the scheduler annotations, valid, invalid and empty.
func serviceCorpus() map[string]*v1.Service {
	svc := servicetest.Service
	with := func(s *v1.Service, edit func(*v1.Service)) *v1.Service { edit(s); return s }
	out := map[string]*v1.Service{
		"clusterip":        svc("web", "10.96.0.10"),
		"nodeport":         svc("web", "10.96.0.10", servicetest.NodePort(30080)),
		"loadbalancer":     svc("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140", "2001:db8:1::140")),
		"lb-local":         svc("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140"), servicetest.ExternalLocal(32122)),
		"lb-local-no-hcnp": svc("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140"), servicetest.ExternalLocal(0)),
		"lb-hcnp-range":    svc("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140"), servicetest.ExternalLocal(70000)),
		"udp":              svc("dns", "10.96.0.53", servicetest.Protocol(v1.ProtocolUDP)),
		"sctp":             svc("s", "10.96.0.54", servicetest.Protocol(v1.ProtocolSCTP), servicetest.NodePort(30054)),
		"no-protocol":      svc("s", "10.96.0.55", servicetest.Protocol("")),
		"icmp":             svc("s", "10.96.0.56", servicetest.Protocol("ICMP")),
		"older":            svc("web", "10.96.0.10", servicetest.CreatedAt(servicetest.Created.Add(-time.Hour))),
		"zero-created":     with(svc("web", "10.96.0.10"), func(s *v1.Service) { s.CreationTimestamp = metav1.Time{} }),
		"dual-stack": svc("web", "10.96.0.10", servicetest.NodePort(30080), func(s *v1.Service) {
			s.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:96::10"}
		}),
		"ipv6-first": svc("web", "fd00:96::10", func(s *v1.Service) { s.Spec.ClusterIPs = []string{"fd00:96::10", "10.96.0.10"} }),
		"headless":   svc("web", v1.ClusterIPNone),
		"headless-unlisted": {ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"},
			Spec: v1.ServiceSpec{ClusterIP: v1.ClusterIPNone}},
		"none-listed-not-headless": svc("web", "", func(s *v1.Service) { s.Spec.ClusterIPs = []string{v1.ClusterIPNone} }),
		"headless-listing-an-ip":   svc("web", v1.ClusterIPNone, func(s *v1.Service) { s.Spec.ClusterIPs = []string{"10.96.0.10"} }),
		"externalname": svc("web", "", func(s *v1.Service) {
			s.Spec.Type, s.Spec.ExternalName, s.Spec.ClusterIPs = v1.ServiceTypeExternalName, "example.invalid", nil
		}),
		"externalname-with-ips": svc("web", "10.96.0.10", func(s *v1.Service) {
			s.Spec.Type, s.Spec.ExternalIPs = v1.ServiceTypeExternalName, []string{"203.0.113.5"}
		}),
		"cluster-ip-only":      svc("web", "10.96.0.10", func(s *v1.Service) { s.Spec.ClusterIPs = nil }),
		"no-cluster-ip":        svc("web", "", func(s *v1.Service) { s.Spec.ClusterIPs = nil }),
		"bad-cluster-ip":       svc("web", "10.96.0.300"),
		"mapped-cluster-ip":    svc("web", "::ffff:10.96.0.10"),
		"uppercase-cluster-ip": svc("web", "FD00:96::10"),
		"long-form-cluster-ip": svc("web", "fd00:96:0:0:0:0:0:10"),
		"zoned-cluster-ip":     svc("web", "fe80::10%eth0"),
		"mixed-cluster-ips":    svc("web", "10.96.0.10", func(s *v1.Service) { s.Spec.ClusterIPs = []string{"10.96.0.10", "bogus", "10.96.0.10"} }),
		"unknown-type":         svc("web", "10.96.0.10", func(s *v1.Service) { s.Spec.Type = "Mystery" }),
		"no-type":              svc("web", "10.96.0.10", func(s *v1.Service) { s.Spec.Type = "" }),
		"unknown-policies": svc("web", "10.96.0.10", func(s *v1.Service) {
			s.Spec.ExternalTrafficPolicy, s.Spec.InternalTrafficPolicy = "Sometimes", servicetest.Ptr(v1.ServiceInternalTrafficPolicy("Sometimes"))
		}),
		"internal-local": svc("web", "10.96.0.10", func(s *v1.Service) {
			s.Spec.InternalTrafficPolicy = servicetest.Ptr(v1.ServiceInternalTrafficPolicyLocal)
		}),
		"internal-cluster": svc("web", "10.96.0.10", func(s *v1.Service) {
			s.Spec.InternalTrafficPolicy = servicetest.Ptr(v1.ServiceInternalTrafficPolicyCluster)
		}),
		"external-cluster":      svc("web", "10.96.0.10", func(s *v1.Service) { s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster }),
		"affinity-default":      svc("web", "10.96.0.10", func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }),
		"affinity-none":         svc("web", "10.96.0.10", func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityNone }),
		"affinity-timeout":      affinity(servicetest.Ptr(int32(600))),
		"affinity-timeout-bad":  affinity(servicetest.Ptr(int32(86401))),
		"affinity-timeout-zero": affinity(servicetest.Ptr(int32(0))),
		"affinity-no-timeout":   affinity(nil),
		"affinity-no-client-ip": svc("web", "10.96.0.10", func(s *v1.Service) {
			s.Spec.SessionAffinity, s.Spec.SessionAffinityConfig = v1.ServiceAffinityClientIP, &v1.SessionAffinityConfig{}
		}),
		"affinity-config-unused": svc("web", "10.96.0.10", func(s *v1.Service) {
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: servicetest.Ptr(int32(60))}}
		}),
		"ports": svc("web", "10.96.0.10", servicetest.NodePort(30080), func(s *v1.Service) {
			for p := range int32(5) {
				s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "p" + strconv.Itoa(int(p)), Port: 1000 + p, Protocol: v1.ProtocolUDP, NodePort: 31000 + p})
			}
		}),
		"bad-ports": svc("web", "10.96.0.10", func(s *v1.Service) {
			s.Spec.Ports = append(s.Spec.Ports,
				v1.ServicePort{Name: "big", Port: 70000, Protocol: v1.ProtocolTCP},
				v1.ServicePort{Name: "icmp", Port: 81, Protocol: "ICMP"},
				v1.ServicePort{Name: "again", Port: 80, Protocol: v1.ProtocolTCP},
				v1.ServicePort{Name: "np", Port: 82, Protocol: v1.ProtocolTCP, NodePort: -3})
		}),
		"no-ports": svc("web", "10.96.0.10", func(s *v1.Service) { s.Spec.Ports = nil }),
		"external-ips": svc("web", "10.96.0.10", func(s *v1.Service) {
			s.Spec.ExternalIPs = []string{"203.0.113.5", "2001:db8::5", "203.0.113.5"}
		}),
		"external-ips-bad": svc("web", "10.96.0.10", func(s *v1.Service) {
			s.Spec.ExternalIPs = []string{"203.0.113.5", "bogus", "0:0::1", "127.0.0.1", "::ffff:203.0.113.6", "fe80::1%eth0", "", "2001:DB8::7", "10.96.0.10", "10.244.1.9"}
		}),
		"external-ips-not-canonical": svc("web", "10.96.0.10", func(s *v1.Service) {
			s.Spec.ExternalIPs = []string{"0:0::1", "2001:DB8::7", "203.0.113.5", "::FFFF:127.0.0.1"}
		}),
		"external-ip-guard": svc("web", "10.96.0.10", func(s *v1.Service) {
			s.Spec.ExternalIPs = []string{"192.0.2.77", "10.96.0.99", "10.250.1.5", "203.0.113.200", "192.0.2.10", "203.0.113.10"}
		}),
		"lb-ingress": svc("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140", "203.0.113.141", "203.0.113.142", "bogus", "198.51.100.1"), func(s *v1.Service) {
			in := s.Status.LoadBalancer.Ingress
			in[1].IPMode = servicetest.Ptr(v1.LoadBalancerIPModeProxy)
			in[2].IPMode = servicetest.Ptr(v1.LoadBalancerIPModeVIP)
			in[3].IPMode = servicetest.Ptr(v1.LoadBalancerIPMode("Other"))
			s.Status.LoadBalancer.Ingress = append(in, v1.LoadBalancerIngress{Hostname: "lb.example.invalid"}, v1.LoadBalancerIngress{IP: "2001:db8:1::140", Ports: []v1.PortStatus{{Port: 80}}})
		}),
		"ingress-not-lb": svc("web", "10.96.0.10", servicetest.NodePort(30080), func(s *v1.Service) {
			s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "203.0.113.140"}}
			s.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24"}
		}),
		"source-ranges": svc("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.140", "2001:db8:1::140"), func(s *v1.Service) {
			s.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24", " 192.0.2.0/25 ", "2001:db8::/32", "0.0.0.0/0", "bogus", "198.51.100.7/24"}
		}),
		"scheduler": with(svc("web", "10.96.0.10"), func(s *v1.Service) {
			s.Annotations = map[string]string{AnnotationScheduler: "mh", AnnotationSchedulerFlags: "mh-port", "other": "x"}
		}),
		"scheduler-bad":   with(svc("web", "10.96.0.10"), func(s *v1.Service) { s.Annotations = map[string]string{AnnotationScheduler: "mhh"} }),
		"scheduler-empty": with(svc("web", "10.96.0.10"), func(s *v1.Service) { s.Annotations = map[string]string{AnnotationScheduler: " "} }),
		"scheduler-flags": with(svc("web", "10.96.0.10"), func(s *v1.Service) {
			s.Annotations = map[string]string{AnnotationSchedulerFlags: "sh-fallback,sh-port"}
		}),
		"scheduler-flags-bad": with(svc("web", "10.96.0.10"), func(s *v1.Service) {
			s.Annotations = map[string]string{AnnotationScheduler: "sh", AnnotationSchedulerFlags: "mh-port"}
		}),
		"trigger-time": with(svc("web", "10.96.0.10"), func(s *v1.Service) {
			s.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: "2026-12-02T10:00:00Z"}
		}),
		"everything-else": with(svc("web", "10.96.0.10"), func(s *v1.Service) {
			s.UID, s.ResourceVersion, s.Labels = "0b5e3c1a-0000-4000-8000-000000000001", "42", map[string]string{"app": "web"}
			s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
			s.Spec.Selector, s.Spec.IPFamilies = map[string]string{"app": "web"}, []v1.IPFamily{v1.IPv4Protocol}
			s.Spec.IPFamilyPolicy = servicetest.Ptr(v1.IPFamilyPolicySingleStack)
			s.Spec.TrafficDistribution = servicetest.Ptr(v1.ServiceTrafficDistributionPreferClose)
			s.Spec.Ports[0].AppProtocol = servicetest.Ptr("http")
		}),
	}
	return out
}

func affinity(timeout *int32) *v1.Service {
	return servicetest.Service("web", "10.96.0.10", func(s *v1.Service) {
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: timeout}}
	})
}

// keptFields is svc with only what ipvsproxy.Service keeps: what a reader
// reads, spec.clusterIPs listed (but a headless Service's "None"), and
// spec.clusterIP its first unless headless or "None".
func keptFields(svc *v1.Service) *v1.Service {
	out := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID, ResourceVersion: svc.ResourceVersion,
			CreationTimestamp: svc.CreationTimestamp},
		Spec: v1.ServiceSpec{
			Type: svc.Spec.Type, ClusterIP: svc.Spec.ClusterIP, ClusterIPs: svc.Spec.ClusterIPs,
			ExternalTrafficPolicy: svc.Spec.ExternalTrafficPolicy, InternalTrafficPolicy: svc.Spec.InternalTrafficPolicy,
			SessionAffinity: svc.Spec.SessionAffinity, SessionAffinityConfig: svc.Spec.SessionAffinityConfig,
			HealthCheckNodePort: svc.Spec.HealthCheckNodePort,
			ExternalIPs:         svc.Spec.ExternalIPs, LoadBalancerSourceRanges: svc.Spec.LoadBalancerSourceRanges,
		},
	}
	headless := out.Spec.ClusterIP == v1.ClusterIPNone
	if len(out.Spec.ClusterIPs) == 0 && out.Spec.ClusterIP != "" && !headless {
		out.Spec.ClusterIPs = []string{out.Spec.ClusterIP}
	}
	if !headless {
		out.Spec.ClusterIP = ""
		if len(out.Spec.ClusterIPs) > 0 && out.Spec.ClusterIPs[0] != v1.ClusterIPNone {
			out.Spec.ClusterIP = out.Spec.ClusterIPs[0]
		}
	}
	for _, p := range svc.Spec.Ports {
		out.Spec.Ports = append(out.Spec.Ports, v1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, NodePort: p.NodePort})
	}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP != "" {
			out.Status.LoadBalancer.Ingress = append(out.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ing.IP, IPMode: ing.IPMode})
		}
	}
	for _, k := range []string{AnnotationScheduler, AnnotationSchedulerFlags} {
		if v, ok := svc.Annotations[k]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	return out
}

// The compact Service gives back every field a reader reads, as the API
// object had it, and reads as the API object to the informer's store.
func TestCompactServiceKeepsWhatTheProxierReads(t *testing.T) {
	for name, svc := range serviceCorpus() {
		got := CompactService(svc)
		if diff := cmp.Diff(keptFields(svc), got.ToService(), cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
			t.Errorf("%s: kept (-want +got):\n%s", name, diff)
		}
		m, err := meta.Accessor(got)
		if err != nil || m.GetNamespace() != svc.Namespace || m.GetName() != svc.Name || m.GetResourceVersion() != svc.ResourceVersion || m.GetUID() != svc.UID {
			t.Errorf("%s: meta.Accessor: %v, %v", name, m, err)
		}
	}
}

// ToService's result is the caller's own: changing it changes nothing of
// the compact Service, which the cache and the tracker share.
func TestToServiceSharesNothing(t *testing.T) {
	for name, svc := range serviceCorpus() {
		c := CompactService(svc)
		want := c.ToService().DeepCopy()
		mess := c.ToService()
		mess.Spec.ClusterIPs = append(mess.Spec.ClusterIPs[:0:0], "x")
		for _, l := range [][]string{mess.Spec.ClusterIPs, mess.Spec.ExternalIPs, mess.Spec.LoadBalancerSourceRanges} {
			for i := range l {
				l[i] = "changed"
			}
		}
		for i := range mess.Spec.Ports {
			mess.Spec.Ports[i].Port = -1
		}
		for _, ing := range mess.Status.LoadBalancer.Ingress {
			if ing.IPMode != nil {
				*ing.IPMode = "changed"
			}
		}
		if p := mess.Spec.InternalTrafficPolicy; p != nil {
			*p = "changed"
		}
		if c := mess.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			*c.ClientIP.TimeoutSeconds = -1
		}
		if diff := cmp.Diff(want, c.ToService()); diff != "" {
			t.Errorf("%s: changing ToService's result changed the Service (-before +after):\n%s", name, diff)
		}
	}
}

// Most Services' cluster IPs are kept as addresses, not as text, and a
// Service with none of the rare parts has no rare part.
func TestCompactServiceParsesAndLeavesRareOut(t *testing.T) {
	c := CompactService(servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080), func(s *v1.Service) {
		s.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:96::10"}
		s.Spec.InternalTrafficPolicy = servicetest.Ptr(v1.ServiceInternalTrafficPolicyCluster)
		s.Labels, s.Spec.Selector = map[string]string{"app": "web"}, map[string]string{"app": "web"}
	}))
	if want := []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00:96::10")}; !slices.Equal(c.clusterIPs, want) || c.rare != nil {
		t.Errorf("cluster IPs %v (want %v), rare %+v (want none)", c.clusterIPs, want, c.rare)
	}
	for name, svc := range map[string]*v1.Service{"headless": servicetest.Service("web", v1.ClusterIPNone), "headless-unlisted": {Spec: v1.ServiceSpec{ClusterIP: v1.ClusterIPNone}}} {
		if c := CompactService(svc); c.rare != nil || c.clusterIPs != nil {
			t.Errorf("%s: cluster IPs %v, rare %+v; want neither", name, c.clusterIPs, c.rare)
		}
	}
}

// Every field of a Service every node keeps costs 8 bytes or more per
// Service of the cluster: the struct stays in its size class.
func TestServiceSize(t *testing.T) {
	if size := reflect.TypeFor[Service]().Size(); size > 160 {
		t.Errorf("Service is %d bytes", size)
	}
}

// The compact Service reads as the API object did: BuildService makes the
// same state and the same problems, word for word, for every family order,
// with and without the external IP guard's facts; the guard's index and
// the ownership evidence read the same addresses.
func TestCompactServiceReadsAsTheAPIObject(t *testing.T) {
	for name, svc := range serviceCorpus() {
		t.Run(name, func(t *testing.T) { checkServiceReadsAsAPIObject(t, svc) })
	}
}

func FuzzCompactServiceReadsAsTheAPIObject(f *testing.F) {
	f.Add("LoadBalancer", "10.96.0.10", "fd00:96::10", "203.0.113.5", "203.0.113.140", "198.51.100.0/24", "TCP", int32(80), int32(30080), int32(32122), int32(600), "mh", "mh-port", "Proxy", uint16(0))
	f.Add("NodePort", "None", "", "bogus", "", "bogus", "", int32(70000), int32(-1), int32(0), int32(0), "", "", "", uint16(0xffff))
	f.Add("ClusterIP", "FD00::1", "::ffff:10.0.0.1", "fe80::1%eth0", "2001:DB8::5", " 10.0.0.0/8", "ICMP", int32(0), int32(0), int32(70000), int32(86401), " ", "x", "VIP", uint16(0x5a5a))
	f.Fuzz(func(t *testing.T, typ, ip1, ip2, externalIP, lbIP, sourceRange, proto string, port, nodePort, hcnp, timeout int32, scheduler, flags, ipMode string, bits uint16) {
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "fuzz", Name: "svc", UID: types.UID(ip2), CreationTimestamp: metav1.NewTime(time.Unix(int64(port), 0))},
			Spec: v1.ServiceSpec{
				Type: v1.ServiceType(typ), ClusterIP: ip1, ClusterIPs: []string{ip1, ip2},
				Ports: []v1.ServicePort{
					{Name: "a", Protocol: v1.Protocol(proto), Port: port, NodePort: nodePort, TargetPort: intstr.FromInt32(port)},
					{Name: scheduler, Protocol: v1.ProtocolUDP, Port: nodePort, NodePort: hcnp},
				},
				HealthCheckNodePort: hcnp,
			},
		}
		opt := func(bit int) bool { return bits&(1<<bit) != 0 }
		if opt(0) {
			svc.Spec.ClusterIPs = svc.Spec.ClusterIPs[:1]
		}
		if opt(1) {
			svc.Spec.ClusterIPs = nil
		}
		if opt(2) {
			svc.Spec.ExternalIPs = []string{externalIP, ip1, lbIP}
		}
		if opt(3) {
			svc.Spec.LoadBalancerSourceRanges = []string{sourceRange, lbIP + "/24", externalIP}
		}
		if opt(4) {
			svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: lbIP}, {IP: externalIP, IPMode: (*v1.LoadBalancerIPMode)(&ipMode)}, {Hostname: lbIP}}
		}
		if opt(5) {
			svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicy(ipMode)
		}
		if opt(6) {
			svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		}
		if opt(7) {
			svc.Spec.InternalTrafficPolicy = (*v1.ServiceInternalTrafficPolicy)(&ipMode)
		}
		if opt(8) {
			svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		}
		switch bits >> 9 & 3 {
		case 1:
			svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{}
		case 2:
			svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{}}
		case 3:
			svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &timeout}}
		}
		if opt(11) || opt(12) {
			svc.Annotations = map[string]string{"other": flags}
			if opt(11) {
				svc.Annotations[AnnotationScheduler] = scheduler
			}
			if opt(12) {
				svc.Annotations[AnnotationSchedulerFlags] = flags
			}
		}
		if opt(13) {
			svc.Spec.ClusterIP = v1.ClusterIPNone
		}
		if opt(14) {
			svc.Spec.Ports = svc.Spec.Ports[:1]
		}
		checkServiceReadsAsAPIObject(t, svc)
		if diff := cmp.Diff(keptFields(svc), CompactService(svc).ToService(), cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
			t.Errorf("kept (-want +got):\n%s", diff)
		}
	})
}

func checkServiceReadsAsAPIObject(t *testing.T, svc *v1.Service) {
	t.Helper()
	compact := CompactService(svc)
	if want, got := addressesOfAPIObject(svc), AddressesOf(compact); !cmp.Equal(want, got, cmp.AllowUnexported(serviceAddresses{}), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })) {
		t.Errorf("AddressesOf: API object %+v, compact %+v", want, got)
	}
	owner := svc // the slices take their port from the Service's first
	if len(svc.Spec.Ports) == 0 {
		owner = servicetest.Service(svc.Name, "")
		owner.Namespace = svc.Namespace
	}
	slices := compactEndpointSlices([]*discovery.EndpointSlice{
		servicetest.Slice(owner, svc.Name+"-a", 8080, "10.244.1.5@node1", "10.244.2.7@node2/terminating"),
		servicetest.Slice(owner, svc.Name+"-b", 8080, "fd00:244::5@node1", "fd00:244::7@node2"),
	})
	node := NodeInfo{Name: servicetest.ThisNode, Addresses: []netip.Addr{servicetest.Node1IP, servicetest.Node1IP6, netip.MustParseAddr("203.0.113.142")},
		PodCIDRs:   []netip.Prefix{netip.MustParsePrefix("10.250.1.0/24")},
		ClusterIPs: map[netip.Addr][]types.NamespacedName{netip.MustParseAddr("192.0.2.77"): {{Namespace: "other", Name: "victim"}}}}
	guarded := testConfig()
	guarded.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}
	guarded.ExternalIPCIDRs = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/25"), netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::/32")}
	for _, families := range [][]v1.IPFamily{{v1.IPv4Protocol}, {v1.IPv6Protocol}, {v1.IPv4Protocol, v1.IPv6Protocol}, {v1.IPv6Protocol, v1.IPv4Protocol}} {
		for _, cfg := range []Config{testConfig(), guarded} {
			cfg.Families = families
			want := BuildService(svc, slices, node, cfg)
			got := BuildService(compact.ToService(), slices, node, cfg)
			if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
				cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }), cmp.Transformer("unpacked", unpacked), cmp.AllowUnexported(VirtualServerState{}, ServiceState{})); diff != "" {
				t.Errorf("%v: BuildService (-API object +compact):\n%s", families, diff)
			}
		}
	}
}

// addressesOfAPIObject is AddressesOf as it read the API object, before
// the compact Service.
func addressesOfAPIObject(svc *v1.Service) serviceAddresses {
	var out serviceAddresses
	parse := func(list []string) []netip.Addr {
		var addrs []netip.Addr
		for _, s := range list {
			if a, err := netip.ParseAddr(s); err == nil && !slices.Contains(addrs, a.Unmap()) {
				addrs = append(addrs, a.Unmap())
			}
		}
		return addrs
	}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	if svc.Spec.Type != v1.ServiceTypeExternalName {
		out.ClusterIPs = parse(ips)
	}
	var ingress []string
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		ingress = append(ingress, ing.IP)
	}
	out.chosen = parse(append(slices.Clone(svc.Spec.ExternalIPs), ingress...))
	return out
}

// benchmarkedService is a Service as the API server writes a common one:
// ClusterIP, one port, the defaults set.
func benchmarkedService() *v1.Service {
	return servicetest.Service("web", "10.96.0.10", func(s *v1.Service) {
		s.UID, s.ResourceVersion = "0b5e3c1a-0000-4000-8000-000000000001", "123456"
		s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = []v1.IPFamily{v1.IPv4Protocol}, servicetest.Ptr(v1.IPFamilyPolicySingleStack)
		s.Spec.InternalTrafficPolicy, s.Spec.SessionAffinity = servicetest.Ptr(v1.ServiceInternalTrafficPolicyCluster), v1.ServiceAffinityNone
	})
}

// BenchmarkCompactService is the informer transform's work per Service
// (once per Service and change).
func BenchmarkCompactService(b *testing.B) {
	svc := benchmarkedService()
	b.ReportAllocs()
	for b.Loop() {
		CompactService(svc)
	}
}

// BenchmarkToService is what the tracker's Input adds to each BuildService
// (every Service of a cold or full sync).
func BenchmarkToService(b *testing.B) {
	c := CompactService(benchmarkedService())
	b.ReportAllocs()
	for b.Loop() {
		c.ToService()
	}
}

// BenchmarkAddressesOf is the guard index's and the ownership evidence's
// read of a Service (every Service of a full sync), of the compact Service
// and, before it, of the API object.
func BenchmarkAddressesOf(b *testing.B) {
	svc := benchmarkedService()
	c := CompactService(svc)
	b.Run("compact", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			AddressesOf(c)
		}
	})
	b.Run("API object", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			addressesOfAPIObject(svc)
		}
	})
}
