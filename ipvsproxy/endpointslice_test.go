package ipvsproxy

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// everyKindOfEndpoint is a slice with every case a reader tells apart:
// addresses that parse (IPv4, IPv6, IPv4-mapped), that do not, with a
// zone, empty, none and several; conditions set true, false or not at all;
// hints none, empty, repeated and for nodes; ports without a name,
// protocol or number, and out of range.
func everyKindOfEndpoint(family discovery.AddressType) *discovery.EndpointSlice {
	yes, no := ptrTo(true), ptrTo(false)
	zoneA := &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-a"}}}
	return &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-abcde", UID: "0b5e3c1a-0000-4000-8000-000000000001", ResourceVersion: "42",
			Labels:      map[string]string{discovery.LabelServiceName: "web"},
			Annotations: map[string]string{v1.EndpointsLastChangeTriggerTime: "2026-12-02T10:00:00Z"}},
		AddressType: family,
		Ports: []discovery.EndpointPort{
			{Name: ptrTo("http"), Port: ptrTo(int32(8080)), Protocol: ptrTo(v1.ProtocolTCP)},
			{Name: ptrTo("dns"), Port: ptrTo(int32(53)), Protocol: ptrTo(v1.ProtocolUDP)},
			{Port: ptrTo(int32(9090))},
			{Name: ptrTo("none")},
			{Name: ptrTo("zero"), Port: ptrTo(int32(0))},
			{Name: ptrTo("big"), Port: ptrTo(int32(70000)), Protocol: ptrTo(v1.ProtocolSCTP)},
		},
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.244.1.5"}, NodeName: ptrTo("node1"), Conditions: discovery.EndpointConditions{Ready: yes, Serving: yes, Terminating: no}, Hints: zoneA},
			{Addresses: []string{"10.244.1.6"}, NodeName: ptrTo("node1"), Conditions: discovery.EndpointConditions{Ready: no, Serving: yes, Terminating: yes}, Hints: zoneA},
			{Addresses: []string{"fd00::5"}, NodeName: ptrTo("node2"), Hints: &discovery.EndpointHints{ForNodes: []discovery.ForNode{{Name: "node2"}}}},
			{Addresses: []string{"::ffff:10.244.1.7"}, Conditions: discovery.EndpointConditions{Ready: no}},
			{Addresses: []string{"not-an-ip"}, NodeName: ptrTo("")},
			{Addresses: []string{"fe80::1%eth0"}},
			{Addresses: []string{""}},
			{},
			{Addresses: []string{"10.244.1.8", "10.244.1.9", "bogus"}, Hints: &discovery.EndpointHints{}},
			{Addresses: []string{"10.244.1.5"}, NodeName: ptrTo("node3"), Conditions: discovery.EndpointConditions{Ready: yes}},
		},
	}
}

// The compact slice gives back every field the proxier reads, as the API
// object had it: the ports with the API's defaults, an IPv4-mapped address
// unmapped (every reader unmaps it).
func TestCompactSliceKeepsWhatTheProxierReads(t *testing.T) {
	in := everyKindOfEndpoint(discovery.AddressTypeIPv4)
	in.GenerateName, in.OwnerReferences = "web-", []metav1.OwnerReference{{Kind: "Service", Name: "web"}}
	in.Labels["app"] = "web"
	in.Endpoints[0].TargetRef, in.Endpoints[0].Zone = &v1.ObjectReference{Kind: "Pod", Name: "web-1"}, ptrTo("zone-a")
	want := everyKindOfEndpoint(discovery.AddressTypeIPv4)
	want.Ports[2].Name, want.Ports[2].Protocol = ptrTo(""), ptrTo(v1.ProtocolTCP)
	want.Ports[3].Protocol, want.Ports[4].Protocol = ptrTo(v1.ProtocolTCP), ptrTo(v1.ProtocolTCP)
	want.Endpoints[3].Addresses = []string{"10.244.1.7"}
	want.Endpoints[8].Hints = &discovery.EndpointHints{}
	got := CompactEndpointSlice(in)
	if diff := cmp.Diff(want, got.ToDiscovery()); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	// The informer's store reads the metadata through meta.Accessor.
	m, err := meta.Accessor(got)
	if err != nil || m.GetNamespace() != "default" || m.GetName() != "web-abcde" || m.GetResourceVersion() != "42" || m.GetUID() != in.UID {
		t.Errorf("meta.Accessor: %v, %v", m, err)
	}
	// Endpoints with the same hints share them.
	z0, _ := got.Hints(0)
	z1, _ := got.Hints(1)
	if len(z0) != 1 || &z0[0] != &z1[0] {
		t.Errorf("equal hints not shared: %v %v", z0, z1)
	}
}

// An endpoint is 16 bytes, and a slice at most 192 (a size class): a field more
// would take 8 more for each of the cluster's endpoints on every node, or
// 16 more for each slice.
func TestSliceEndpointIs16Bytes(t *testing.T) {
	if size := reflect.TypeFor[sliceEndpoint]().Size(); size != 16 {
		t.Errorf("sliceEndpoint is %d bytes", size)
	}
	if size := reflect.TypeFor[EndpointSlice]().Size(); size > 192 {
		t.Errorf("EndpointSlice is %d bytes", size)
	}
}

// The compact slice reads as the API object did: the same endpoints and
// the same problems, word for word, for every family, the API server
// guard's addresses too.
func TestCompactSliceReadsAsTheAPIObject(t *testing.T) {
	for _, family := range []discovery.AddressType{discovery.AddressTypeIPv4, discovery.AddressTypeIPv6, discovery.AddressTypeFQDN, "bogus"} {
		s := everyKindOfEndpoint(family)
		s2 := everyKindOfEndpoint(family)
		s2.Name, s2.Endpoints = "web-fghij", s2.Endpoints[:3]
		checkReadsAsAPIObjects(t, []*discovery.EndpointSlice{s, s2})
	}
}

func FuzzCompactSliceReadsAsTheAPIObject(f *testing.F) {
	f.Add("IPv4", "10.244.1.5", "fd00::1", "node1", "zone-a", int32(8080), "TCP", byte(0))
	f.Add("IPv6", "::ffff:1.2.3.4", "fe80::1%eth0", "", "", int32(0), "", byte(255))
	f.Add("IPv4", "", "1.2.3.4.5", "node2", "z", int32(70000), "SCTP", byte(0x5a))
	f.Fuzz(func(t *testing.T, family, addr1, addr2, node, zone string, port int32, proto string, flags byte) {
		tri := func(bits byte) *bool {
			switch bits & 3 {
			case 1:
				return ptrTo(false)
			case 2:
				return ptrTo(true)
			}
			return nil
		}
		ep := func(addrs []string, bits byte) discovery.Endpoint {
			e := discovery.Endpoint{Addresses: addrs, Conditions: discovery.EndpointConditions{Ready: tri(bits), Serving: tri(bits >> 2), Terminating: tri(bits >> 4)}}
			if bits&64 != 0 {
				e.NodeName = &node
			}
			if bits&128 != 0 {
				e.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: zone}}, ForNodes: []discovery.ForNode{{Name: node}}}
			}
			return e
		}
		s := &discovery.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "fuzz", Name: "s", UID: "u"},
			AddressType: discovery.AddressType(family),
			Ports:       []discovery.EndpointPort{{Name: &zone, Port: &port, Protocol: (*v1.Protocol)(&proto)}, {Port: &port}},
			Endpoints:   []discovery.Endpoint{ep([]string{addr1}, flags), ep([]string{addr2, addr1}, ^flags), ep(nil, flags), ep([]string{addr1}, flags>>1)},
		}
		checkReadsAsAPIObjects(t, []*discovery.EndpointSlice{s})
	})
}

func checkReadsAsAPIObjects(t *testing.T, list []*discovery.EndpointSlice) {
	t.Helper()
	compact := compactEndpointSlices(list)
	for _, family := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		wantEps, wantProblems := endpointsByPortOfAPIObjects(list, family)
		gotEps, gotProblems := EndpointsByPort(compact, family, endpointPolicy{})
		if diff := cmp.Diff(wantEps, gotEps, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
			t.Errorf("%s endpoints (-API object +compact):\n%s", family, diff)
		}
		if diff := cmp.Diff(wantProblems, gotProblems); diff != "" {
			t.Errorf("%s problems (-API object +compact):\n%s", family, diff)
		}
	}
	if want, got := apiServerAddressesOfAPIObjects(list), APIServerAddresses(compact); !slices.Equal(want, got) {
		t.Errorf("API server addresses: %v from the API objects, %v from the compact slices", want, got)
	}
	for i, s := range list {
		if got := compact[i].ServiceName; got != s.Labels[discovery.LabelServiceName] {
			t.Errorf("service name %q", got)
		}
	}
}

// The interner stops growing at its bound; values past it are kept as
// given.
func TestInternerStopsAtItsBound(t *testing.T) {
	in := &interner{max: 2}
	for _, v := range []string{"n1", "n2", "n3", "n4", "n1"} {
		if got := in.internString(v); got != v {
			t.Errorf("interned %q as %q", v, got)
		}
	}
	if in.Len() != 2 {
		t.Errorf("the interner holds %d values, want its bound of 2", in.Len())
	}
	a, b := in.intern(ptrTo("n1")), in.intern(ptrTo("n1"))
	if a != b {
		t.Error("one value interned twice gave two copies")
	}
}

// The readers of API objects before the compact slice, word for word: the
// compact slice must read the same.

func endpointsByPortOfAPIObjects(slices_ []*discovery.EndpointSlice, family v1.IPFamily) (map[PortKey][]Endpoint, []Problem) {
	lists := map[PortKey]*endpointList{}
	var problems []Problem
	for _, slice := range slices_ {
		if string(slice.AddressType) != string(family) {
			continue // the other family's slices, and FQDN ones, are not ours
		}
		ref := v1.ObjectReference{Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1", Namespace: slice.Namespace, Name: slice.Name, UID: slice.UID}
		bad := func(format string, args ...any) {
			problems = append(problems, Problem{Object: ref, Reason: ReasonInvalidEndpoint, Message: fmt.Sprintf(format, args...)})
		}
		for _, port := range slice.Ports {
			if port.Port == nil {
				continue // the EndpointSlice API allows a port-less slice; nothing to proxy
			}
			if *port.Port < 1 || *port.Port > 65535 {
				bad("port %d out of range", *port.Port)
				continue
			}
			key := PortKey{Name: deref(port.Name, ""), Protocol: deref(port.Protocol, v1.ProtocolTCP)}
			list := lists[key]
			if list == nil {
				list = &endpointList{eps: make([]Endpoint, 0, len(slice.Endpoints))}
				lists[key] = list
			}
			for _, ep := range slice.Endpoints {
				if len(ep.Addresses) == 0 {
					continue
				}
				// Only the first address is used: the API says consumers
				// may assume the rest are interchangeable (kubernetes#106267).
				addr, err := netip.ParseAddr(ep.Addresses[0])
				if err != nil || addr.Zone() != "" {
					bad("endpoint address %q is not an IP address", ep.Addresses[0])
					continue
				}
				addr = addr.Unmap()
				if FamilyOf(addr) != family {
					bad("endpoint address %s is not %s", addr, family)
					continue
				}
				e := Endpoint{
					Addr:        addr,
					Port:        uint16(*port.Port),
					Ready:       deref(ep.Conditions.Ready, true),
					Serving:     deref(ep.Conditions.Serving, true),
					Terminating: deref(ep.Conditions.Terminating, false),
					NodeName:    deref(ep.NodeName, ""),
				}
				if ep.Hints != nil {
					for _, z := range ep.Hints.ForZones {
						e.ZoneHints = append(e.ZoneHints, z.Name)
					}
					for _, n := range ep.Hints.ForNodes {
						e.NodeHints = append(e.NodeHints, n.Name)
					}
				}
				if i, dup := list.find(e.Addr, e.Port); dup {
					// Overlap is legal while the controller moves an
					// endpoint between slices; keep the ready copy.
					if !list.eps[i].Ready && e.Ready {
						list.eps[i] = e
					}
					problems = append(problems, Problem{Object: ref, Reason: ReasonInvalidEndpoint, Scope: ScopeLog,
						Message: fmt.Sprintf("endpoint %s of port %q listed twice; using one", e, key.Name)})
					continue
				}
				list.add(e)
			}
		}
	}
	out := make(map[PortKey][]Endpoint, len(lists))
	for k, list := range lists {
		slices.SortFunc(list.eps, func(a, b Endpoint) int {
			return netip.AddrPortFrom(a.Addr, a.Port).Compare(netip.AddrPortFrom(b.Addr, b.Port))
		})
		out[k] = list.eps
	}
	return out, problems
}

func apiServerAddressesOfAPIObjects(slices_ []*discovery.EndpointSlice) []netip.Addr {
	var out []netip.Addr
	for _, s := range slices_ {
		for _, ep := range s.Endpoints {
			for _, text := range ep.Addresses {
				if a, err := netip.ParseAddr(text); err == nil && !slices.Contains(out, a.Unmap()) {
					out = append(out, a.Unmap())
				}
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// A UID and resource version kept as numbers come back as written; one the
// API server would not write (upper case, a leading zero, not a UUID) is
// kept as written.
func TestIdentityKeepsWhatItWasGiven(t *testing.T) {
	for _, c := range []struct{ uid, rv string }{
		{"0b5e3c1a-0000-4000-8000-00000000000f", "123456"},
		{"0B5E3C1A-0000-4000-8000-00000000000F", "123456"},
		{"0b5e3c1a-0000-4000-8000-00000000000f", "0123"},
		{"not-a-uuid", "18446744073709551615"},
		{"", ""},
		{"0b5e3c1a-0000-4000-8000-00000000000f", ""},
		{"", "7"},
	} {
		id := newIdentity(types.UID(c.uid), c.rv)
		if string(id.UID()) != c.uid || id.ResourceVersion() != c.rv {
			t.Errorf("%q %q came back as %q %q", c.uid, c.rv, id.UID(), id.ResourceVersion())
		}
	}
}

// A virtual server's set members come back as they were added, in
// CompareSetEntries' order without repeats, whether they pack or not.
func TestSetEntriesKeepWhatTheyWereGiven(t *testing.T) {
	in := []SetEntry{
		{Set: "KUBE-CLUSTER-IP", Entry: ipset.Entry{IP: netip.MustParseAddr("10.96.0.10"), Protocol: "tcp", Port: 80}},
		{Set: "KUBE-6-CLUSTER-IP", Entry: ipset.Entry{IP: netip.MustParseAddr("2001:db8::a"), Protocol: "udp", Port: 53}},
		{Set: "KUBE-IPVS-IPS", Entry: ipset.Entry{IP: netip.MustParseAddr("::ffff:192.0.2.1")}},
		{Set: "KUBE-NODE-PORT-TCP", Entry: ipset.Entry{Port: 30080}},
		{Set: "KUBE-LOOP-BACK", Entry: ipset.Entry{IP: netip.MustParseAddr("10.244.1.5"), Protocol: "tcp", Port: 8080, IP2: netip.MustParseAddr("10.244.1.5")}},
		{Set: "KUBE-LOAD-BALANCER-SRC-CIDR", Entry: ipset.Entry{IP: netip.MustParseAddr("203.0.113.7"), Protocol: "tcp", Port: 443, Net: netip.MustParsePrefix("198.51.100.0/24")}},
		{Set: "SOMEONE-ELSES", Entry: ipset.Entry{IP: netip.MustParseAddr("192.0.2.9"), Protocol: "tcp", Port: 1}},
		{Set: "KUBE-CLUSTER-IP", Entry: ipset.Entry{IP: netip.MustParseAddr("fe80::1%eth0"), Protocol: "tcp", Port: 80}},
		{Set: "KUBE-CLUSTER-IP", Entry: ipset.Entry{IP: netip.MustParseAddr("10.96.0.10"), Protocol: "tcp", Port: 80}},
	}
	var es setEntries
	for _, e := range in {
		es.Add(e)
	}
	es.normalize()
	want := slices.Clone(in[:len(in)-1])
	slices.SortFunc(want, CompareSetEntries)
	if got := slices.Collect(es.All()); !slices.Equal(got, want) {
		t.Errorf("got\n%v\nwant\n%v", got, want)
	}
}
