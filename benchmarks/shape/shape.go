// Package shape generates the clusters the benchmarks sync: N Services with
// their EndpointSlices, the same objects for ipvsproxy and for kube-proxy's
// proxier, so the two are compared on identical input.
//
// The plan: cluster IPs in 10.96.0.0/12 (fd00:96::/108 for IPv6), pods in
// 10.128.0.0/9 (fd00:128::/64), this node "node1" at 198.51.100.1; every
// endpoint is on another node, so every Service is served remotely.
package shape

import (
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The address plan.
var (
	ServiceCIDR  = netip.MustParsePrefix("10.96.0.0/12")
	ServiceCIDR6 = netip.MustParsePrefix("fd00:96::/108")
	ClusterCIDR  = netip.MustParsePrefix("10.128.0.0/9")
	ClusterCIDR6 = netip.MustParsePrefix("fd00:128::/64")
	NodeIP       = netip.MustParseAddr("198.51.100.1")
)

// NodeName is the node the proxier runs on.
const NodeName = "node1"

// The node port range of the shapes.
const NodePortMin, NodePortMax = 30000, 65535

// Shape is one benchmark cluster.
type Shape struct {
	Services  int
	Endpoints int // per Service
	// Mix makes one Service in ten UDP, one in ten externalTrafficPolicy
	// Local (on NodePort ones) and every Service dual-stack.
	Mix bool
	// NoServiceCIDR runs ipvsproxy without a Service CIDR, as on clusters
	// without ServiceCIDR objects or --service-cidrs: it binds every
	// cluster IP on kube-ipvs0, as kube-proxy does, instead of routing the
	// range (the like-for-like cold sync: the same kernel work on both
	// sides). kube-proxy's side is
	// the same either way.
	NoServiceCIDR bool
	// FakeLink puts both sides' kube-ipvs0 on a fake instead of an ifb
	// link over real netlink (with NoServiceCIDR: every cluster IP bound on
	// it): the proxier-only shape, which times neither side's address work.
	FakeLink bool
}

// Name is how reports name the shape: "10000x10", "10000x10-mix",
// "10000x10-bound" (NoServiceCIDR) or "10000x10-bound-fakelink".
func (s Shape) Name() string {
	n := fmt.Sprintf("%dx%d", s.Services, s.Endpoints)
	if s.Mix {
		n += "-mix"
	}
	if s.NoServiceCIDR {
		n += "-bound"
	}
	if s.FakeLink {
		n += "-fakelink"
	}
	return n
}

// Service i: one port 80 (TCP, or UDP one in ten with Mix), NodePort for
// one in four.
func (s Shape) Service(i int) *v1.Service {
	ip := nth(ServiceCIDR, i+1)
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("svc-%d", i), UID: types.UID(fmt.Sprint("uid-", i)),
			CreationTimestamp: metav1.Unix(1700000000, 0)},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeClusterIP, ClusterIP: ip.String(), ClusterIPs: []string{ip.String()},
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports:      []v1.ServicePort{{Name: "p", Port: 80, Protocol: s.protocol(i), TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if i%4 == 0 {
		svc.Spec.Type = v1.ServiceTypeNodePort
		// Distinct for up to 142,000 Services: the shapes' node port
		// range is 30000-65535 (--service-node-port-range), so no two
		// Services clash as they would in the default 2,768 ports.
		svc.Spec.Ports[0].NodePort = int32(NodePortMin + i/4)
		svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
		if s.Mix && i%40 == 0 {
			svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		}
	}
	if s.Mix {
		ip6 := nth(ServiceCIDR6, i+1)
		svc.Spec.ClusterIPs = append(svc.Spec.ClusterIPs, ip6.String())
		svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, v1.IPv6Protocol)
		policy := v1.IPFamilyPolicyRequireDualStack
		svc.Spec.IPFamilyPolicy = &policy
	}
	return svc
}

func (s Shape) protocol(i int) v1.Protocol {
	if s.Mix && i%10 == 5 {
		return v1.ProtocolUDP
	}
	return v1.ProtocolTCP
}

// Slices are Service i's EndpointSlices with n endpoints (one slice per
// family), generation gen changing the last endpoint's address so that
// churn replaces an endpoint rather than adding one.
func (s Shape) Slices(i, n, gen int) []*discovery.EndpointSlice {
	out := []*discovery.EndpointSlice{s.slice(i, n, gen, discovery.AddressTypeIPv4)}
	if s.Mix {
		out = append(out, s.slice(i, n, gen, discovery.AddressTypeIPv6))
	}
	return out
}

func (s Shape) slice(i, n, gen int, family discovery.AddressType) *discovery.EndpointSlice {
	svc := fmt.Sprintf("svc-%d", i)
	proto := s.protocol(i)
	name, pods := svc+"-4", ClusterCIDR
	if family == discovery.AddressTypeIPv6 {
		name, pods = svc+"-6", ClusterCIDR6
	}
	sl := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "bench", Name: name, Labels: map[string]string{discovery.LabelServiceName: svc}},
		AddressType: family,
		Ports:       []discovery.EndpointPort{{Name: ptr("p"), Port: ptr(int32(8080)), Protocol: &proto}},
	}
	for e := 0; e < n; e++ {
		k := i*16 + e
		if e == n-1 {
			k += gen * 16 * 1_000_003 // another address, far from every other Service's
		}
		node := fmt.Sprintf("node%d", 2+e%8)
		sl.Endpoints = append(sl.Endpoints, discovery.Endpoint{
			Addresses:  []string{nth(pods, k+1).String()},
			NodeName:   &node,
			Conditions: discovery.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
		})
	}
	return sl
}

// nth is the n-th address of p (wrapping inside it).
func nth(p netip.Prefix, n int) netip.Addr {
	a := p.Addr().As16()
	hostBits := p.Addr().BitLen() - p.Bits()
	if hostBits < 63 {
		n %= 1 << hostBits
	}
	carry := uint64(n)
	for i := 15; i >= 0 && carry > 0; i-- {
		sum := uint64(a[i]) + carry&0xff
		a[i] = byte(sum)
		carry = carry>>8 + sum>>8
	}
	out := netip.AddrFrom16(a)
	if p.Addr().Is4() {
		return out.Unmap()
	}
	return out
}

func ptr[T any](v T) *T { return &v }
