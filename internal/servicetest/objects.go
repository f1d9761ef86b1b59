package servicetest

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The fixed address plan of the tests: nodes 198.51.100.1 (this node,
// "node1") and 198.51.100.2, service IPs in 10.96.0.0/16 (inside the
// fakes only), pods in 10.244.0.0/16 (PodCIDR), external and LB IPs in
// 203.0.113.0/24.
const ThisNode = "node1"

var (
	Node1IP  = netip.MustParseAddr("198.51.100.1")
	Node1IP6 = netip.MustParseAddr("2001:db8::1")
	PodCIDR  = netip.MustParsePrefix("10.244.0.0/16")
)

// Option edits a Service under construction.
type Option func(*v1.Service)

// Created is when every test Service was created, unless CreatedAt says
// otherwise.
var Created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Service is a ClusterIP Service "default/name" with one TCP port 80 named
// "http", unless opts say otherwise.
func Service(name, clusterIP string, opts ...Option) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, CreationTimestamp: metav1.NewTime(Created)},
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

// NodePort makes the Service a NodePort one.
func NodePort(port int32) Option {
	return func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = port
	}
}

// LoadBalancer makes the Service a LoadBalancer one with ingress ips.
func LoadBalancer(nodePort_ int32, ips ...string) Option {
	return func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = nodePort_
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip})
		}
	}
}

// ExternalLocal sets externalTrafficPolicy Local with its health check port.
func ExternalLocal(healthPort int32) Option {
	return func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = healthPort
	}
}

// Protocol sets the protocol of every port.
func Protocol(p v1.Protocol) Option {
	return func(s *v1.Service) { s.Spec.Ports[0].Protocol = p }
}

// CreatedAt sets the creation time.
func CreatedAt(t time.Time) Option {
	return func(s *v1.Service) { s.CreationTimestamp = metav1.NewTime(t) }
}

// Slice is an EndpointSlice of svc for port; each ep describes an endpoint: "10.244.1.5@node1", with optional conditions
// after a slash: "10.244.1.5@node1/notready", "/terminating" (serving,
// terminating, not ready), "/zone=a".
func Slice(svc *v1.Service, name string, port int32, eps ...string) *discovery.EndpointSlice {
	family := discovery.AddressTypeIPv4
	if len(eps) > 0 && strings.Contains(strings.Split(eps[0], "@")[0], ":") {
		family = discovery.AddressTypeIPv6
	}
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: name,
			Labels: map[string]string{discovery.LabelServiceName: svc.Name}},
		AddressType: family,
		Ports:       []discovery.EndpointPort{{Name: Ptr(svc.Spec.Ports[0].Name), Port: Ptr(port), Protocol: Ptr(svc.Spec.Ports[0].Protocol)}},
	}
	for _, spec := range eps {
		parts := strings.Split(spec, "/")
		addr, node, _ := strings.Cut(parts[0], "@")
		e := discovery.Endpoint{Addresses: []string{addr}, NodeName: Ptr(node),
			Conditions: discovery.EndpointConditions{Ready: Ptr(true), Serving: Ptr(true), Terminating: Ptr(false)}}
		for _, c := range parts[1:] {
			switch {
			case c == "notready":
				e.Conditions = discovery.EndpointConditions{Ready: Ptr(false), Serving: Ptr(false), Terminating: Ptr(false)}
			case c == "terminating":
				e.Conditions = discovery.EndpointConditions{Ready: Ptr(false), Serving: Ptr(true), Terminating: Ptr(true)}
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

// Ptr points at a copy of v.
func Ptr[T any](v T) *T { return &v }
