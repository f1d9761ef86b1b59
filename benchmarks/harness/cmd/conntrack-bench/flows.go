package main

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The cluster the flows belong to: 250 UDP Services of 4 ports each (1,000
// service ports, as BenchmarkCleanUp in conntrack/stream_test.go), each
// backed by 10 endpoints. Cluster IPs are 198.51.100.2-251 (198.51.100.1 is
// shape.NodeIP, bound on lo by netns.Prepare), clients 192.0.2.0/24,
// endpoints 203.0.113.1-100: documentation ranges only, and no packet is
// ever sent, the flows are written into the namespace's table over
// ctnetlink.
const (
	services         = 250
	portsPerService  = 4
	endpointsPerSvc  = 10
	endpointGroups   = 10 // Service s is backed by endpoint group s % 10
	clientsPerAddr   = 60000
	firstClientPort  = 1024
	firstServicePort = 53
	firstTargetPort  = 5353
	// maxFlows keeps client addresses within 192.0.2.1-254.
	maxFlows = 250 * clientsPerAddr
)

// Flow i goes from a client of its own (so every flow is distinct in both
// directions) to port (i/2500)%4 of Service (i/10)%250, DNATed to endpoint
// i%10 of that Service.
//
// The endpoint that is gone is endpoint 0 of group 0, 203.0.113.1: it backed
// the Services s with s%10 == 0, a tenth of them, and carries a tenth of
// their flows, so a flow is stale exactly when i%100 == 0 (i%10 == 0 is
// endpoint 0, and (i/10)%10 == 0 is s%10 == 0 because 250 is a multiple of
// 10). Each side decides by itself which flows are stale, from the Services
// and EndpointSlices after the endpoint went; both must find these.
func flowAt(i int) conntrack.Flow {
	e := i % endpointsPerSvc
	s := (i / endpointsPerSvc) % services
	p := (i / (endpointsPerSvc * services)) % portsPerService
	client := netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(1 + i/clientsPerAddr)}), uint16(firstClientPort+i%clientsPerAddr))
	return conntrack.Flow{
		Protocol: conntrack.UDP,
		OrigSrc:  client,
		OrigDst:  netip.AddrPortFrom(clusterIP(s), uint16(firstServicePort+p)),
		ReplySrc: netip.AddrPortFrom(endpointIP(s, e), uint16(firstTargetPort+p)),
		ReplyDst: client,
	}
}

// isStale reports whether flow i points at the endpoint that is gone.
func isStale(i int) bool { return i%100 == 0 }

// staleCount is how many of flows 0..n-1 are stale.
func staleCount(n int) int { return (n + 99) / 100 }

// flowIndex is the i of a flow made by flowAt, or false for any other flow.
func flowIndex(f conntrack.Flow) (int, bool) {
	a := f.OrigSrc.Addr()
	if !a.Is4() {
		return 0, false
	}
	b := a.As4()
	port := int(f.OrigSrc.Port())
	if b[0] != 192 || b[1] != 0 || b[2] != 2 || b[3] == 0 || port < firstClientPort || port >= firstClientPort+clientsPerAddr {
		return 0, false
	}
	i := (int(b[3])-1)*clientsPerAddr + port - firstClientPort
	want := flowAt(i)
	f.State, f.Timeout = "", 0
	if f != want {
		return 0, false
	}
	return i, true
}

func clusterIP(s int) netip.Addr { return netip.AddrFrom4([4]byte{198, 51, 100, byte(2 + s)}) }

func endpointIP(s, e int) netip.Addr {
	return netip.AddrFrom4([4]byte{203, 0, 113, byte(1 + endpointsPerSvc*(s%endpointGroups) + e)})
}

// goneEndpoint is the endpoint that went away: endpoint 0 of group 0.
var goneEndpoint = endpointIP(0, 0)

// clusterObjects are the Services and their EndpointSlices; with gone, the
// slices no longer list goneEndpoint.
func clusterObjects(gone bool) ([]*v1.Service, []*discovery.EndpointSlice) {
	var svcs []*v1.Service
	var slices []*discovery.EndpointSlice
	udp := v1.ProtocolUDP
	for s := 0; s < services; s++ {
		name := fmt.Sprintf("udp-%d", s)
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name, UID: types.UID("uid-" + name)},
			Spec: v1.ServiceSpec{
				Type: v1.ServiceTypeClusterIP, ClusterIP: clusterIP(s).String(), ClusterIPs: []string{clusterIP(s).String()},
				IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			},
		}
		sl := &discovery.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "bench", Name: name + "-1", Labels: map[string]string{discovery.LabelServiceName: name}},
			AddressType: discovery.AddressTypeIPv4,
		}
		for p := 0; p < portsPerService; p++ {
			port := fmt.Sprintf("p%d", p)
			svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: port, Protocol: udp,
				Port: int32(firstServicePort + p), TargetPort: intstr.FromInt32(int32(firstTargetPort + p))})
			sl.Ports = append(sl.Ports, discovery.EndpointPort{Name: ptr(port), Protocol: ptr(udp), Port: ptr(int32(firstTargetPort + p))})
		}
		for e := 0; e < endpointsPerSvc; e++ {
			ip := endpointIP(s, e)
			if gone && ip == goneEndpoint {
				continue
			}
			node := fmt.Sprintf("node%d", 2+e%8)
			sl.Endpoints = append(sl.Endpoints, discovery.Endpoint{
				Addresses:  []string{ip.String()},
				NodeName:   &node,
				Conditions: discovery.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
			})
		}
		svcs = append(svcs, svc)
		slices = append(slices, sl)
	}
	return svcs, slices
}

func ptr[T any](v T) *T { return &v }

// tally checks a table after a clean-up: every flow left must be one of
// the n generated ones, none stale, none twice, and all the others there.
// Together with the clean-up's own count this says it deleted exactly the
// stale flows.
type tally struct {
	n       int
	seen    []bool
	left    int
	foreign int
	stale   int
	first   []string
}

func newTally(n int) *tally { return &tally{n: n, seen: make([]bool, n)} }

func (t *tally) add(f conntrack.Flow) {
	i, ok := flowIndex(f)
	switch {
	case !ok || i >= t.n || t.seen[i]:
		t.foreign++
		t.note("unexpected flow " + f.String())
	case isStale(i):
		t.seen[i] = true
		t.stale++
		t.left++
		t.note("stale flow left " + f.String())
	default:
		t.seen[i] = true
		t.left++
	}
}

func (t *tally) note(s string) {
	if len(t.first) < 3 {
		t.first = append(t.first, s)
	}
}

// check is nil when the table holds exactly the non-stale flows and the
// clean-up reported deleting exactly the stale ones.
func (t *tally) check(deleted int) error {
	var errs []error
	if want := staleCount(t.n); deleted != want {
		errs = append(errs, fmt.Errorf("clean-up reported %d flows deleted, want the %d stale ones", deleted, want))
	}
	if want := t.n - staleCount(t.n); t.left != want || t.stale != 0 || t.foreign != 0 {
		errs = append(errs, fmt.Errorf("table holds %d flows (%d stale, %d unexpected), want the %d live ones only %v",
			t.left+t.foreign, t.stale, t.foreign, want, t.first))
	}
	return errors.Join(errs...)
}
