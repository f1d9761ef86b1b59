package proxier

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// hugeService has 1,000 ports and 100 external IPs: 100,000 virtual servers
// and as many KUBE-IPVS-SERVICES entries, beyond the kernel's 65,536.
func hugeService() *v1.Service {
	svc := servicetest.Service("huge", "10.96.1.1", servicetest.CreatedAt(servicetest.Created.Add(1)))
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
	// No per-Service cap (TestOneServiceCannotFillASet's): the set's
	// room alone refuses it.
	cfg := testConfig()
	cfg.Limits.MaxSetEntriesPerService = ipvsproxy.MaxIPSetMaxElements
	p, rec := newTestProxier(t, fk, cfg)
	web := servicetest.Service("web", "10.96.0.80")
	p.Tracker().SetService(web)
	p.Tracker().SetEndpointSlice(servicetest.Slice(web, "web-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)

	huge := hugeService()
	p.Tracker().SetService(huge)
	p.Tracker().SetEndpointSlice(servicetest.Slice(huge, "huge-a", 8080, "10.244.1.6@node1"))
	other := servicetest.Service("other", "10.96.0.81", servicetest.CreatedAt(servicetest.Created.Add(2)))
	p.Tracker().SetService(other)
	p.Tracker().SetEndpointSlice(servicetest.Slice(other, "other-a", 8080, "10.244.1.7@node1"))
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
		entries, _ := fk.ipset.Entries(owned.SetIPVSServices)
		if !strings.Contains(fmt.Sprint(entries), name) {
			t.Errorf("%s missing from %s", name, owned.SetIPVSServices)
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
	return servicetest.Slice(svc, svc.Name+"-a", 8080, eps...)
}

func TestServiceWithTwentyThousandEndpoints(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	svc := servicetest.Service("big", "10.96.0.90", servicetest.NodePort(30090))
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(twentyThousandEndpoints(svc))
	mustSync(t, p)
	for _, key := range []ipvs.VirtualServerKey{
		{Protocol: ipvs.TCP, Address: netip.MustParseAddr("10.96.0.90"), Port: 80},
		{Protocol: ipvs.TCP, Address: servicetest.Node1IP, Port: 30090},
	} {
		if rss, err := fk.ipvs.RealServers(key); err != nil || len(rss) != 20000 {
			t.Errorf("%s: %d real servers, %v; want 20000", key, len(rss), err)
		}
	}
	// Local endpoints reaching themselves are masqueraded: 10,000 hairpin entries.
	if entries, _ := fk.ipset.Entries(owned.SetLoopBack); len(entries) != 10000 {
		t.Errorf("%s holds %d entries, want 10000", owned.SetLoopBack, len(entries))
	}
}

// BenchmarkBuildServiceTwentyThousandEndpoints: one rebuild of a Service
// with 20,000 endpoints (union() was quadratic: 0.73 s per port).
func BenchmarkBuildServiceTwentyThousandEndpoints(b *testing.B) {
	svc := servicetest.Service("big", "10.96.0.90", servicetest.NodePort(30090))
	slices := []*ipvsproxy.EndpointSlice{ipvsproxy.CompactEndpointSlice(twentyThousandEndpoints(svc))}
	node := ipvsproxy.NodeInfo{Name: servicetest.ThisNode, Addresses: []netip.Addr{servicetest.Node1IP}}
	cfg := testConfig()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if st := ipvsproxy.BuildService(svc, slices, node, cfg); len(st.VirtualServers) != 2 {
			b.Fatalf("%d virtual servers", len(st.VirtualServers))
		}
	}
}

// portsService has n TCP ports on one cluster IP: n virtual servers, n
// KUBE-IPVS-SERVICES entries and n ownership records.
func portsService(name, namespace, clusterIP string, n int, createdAtTime time.Time) *v1.Service {
	svc := servicetest.Service(name, clusterIP, servicetest.CreatedAt(createdAtTime))
	svc.Namespace = namespace
	svc.Spec.Ports = nil
	for p := 0; p < n; p++ {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: fmt.Sprintf("p%d", p), Port: int32(1000 + p),
			Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)})
	}
	return svc
}

func refusedServices(p *Proxier) []string {
	var out []string
	for _, name := range p.model.RefusedServices() {
		out = append(out, name.String())
	}
	return out
}

// Which Service a full set refuses does not depend on the order the changes
// came in: a node that saw the newer Service first and one that saw both at
// once (a restart) refuse the same one, the newer; a kube-system Service is
// never refused because of a tenant's, even an older one; and when room
// frees up, the refused Service gets in.
func TestSetAdmissionIsTheSameOnEveryNode(t *testing.T) {
	cfg := testConfig()
	cfg.IPSetMaxElements = 12
	older := portsService("older", "tenant", "10.96.0.20", 6, servicetest.Created)
	newer := portsService("newer", "tenant", "10.96.0.21", 6, servicetest.Created.Add(time.Hour))
	dns := portsService("kube-dns", "kube-system", "10.96.0.10", 6, servicetest.Created.Add(2*time.Hour))

	// Node A: the newer Service first, then the older one, then DNS.
	fkA := newFakeKernel()
	a, _ := newTestProxier(t, fkA, cfg)
	a.Tracker().SetService(newer)
	mustSync(t, a)
	a.Tracker().SetService(older)
	mustSync(t, a)
	a.Tracker().SetService(dns)
	mustSync(t, a)
	// Node B: everything at once.
	fkB := newFakeKernel()
	b, _ := newTestProxier(t, fkB, cfg)
	for _, s := range []*v1.Service{dns, newer, older} {
		b.Tracker().SetService(s)
	}
	mustSync(t, b)
	for node, p := range map[string]*Proxier{"A": a, "B": b} {
		if got := fmt.Sprint(refusedServices(p)); got != "[tenant/newer]" {
			t.Errorf("node %s refuses %s, want [tenant/newer]", node, got)
		}
	}
	if dumpA, dumpB := fkA.ipvs.Dump(), fkB.ipvs.Dump(); dumpA != dumpB {
		t.Errorf("the nodes program different virtual servers:\nA:\n%s\nB:\n%s", dumpA, dumpB)
	}
	for _, vip := range []string{"10.96.0.10", "10.96.0.20"} {
		if !strings.Contains(fkA.ipvs.Dump(), vip) {
			t.Errorf("%s missing on node A:\n%s", vip, fkA.ipvs.Dump())
		}
	}
	// The older one goes: the newer gets its room, on the next sync.
	a.Tracker().DeleteService("tenant", "older")
	mustSync(t, a)
	if got := refusedServices(a); len(got) != 0 || !strings.Contains(fkA.ipvs.Dump(), "10.96.0.21") {
		t.Errorf("after the older Service left: refused %v\n%s", got, fkA.ipvs.Dump())
	}
}

// The ownership record holds a member for every virtual server, node ports
// included, so it fills before KUBE-IPVS-SERVICES: it is counted like the
// others, and the Service that would overflow it is refused whole with an
// Event naming it, instead of failing record writes in the kernel.
func TestOwnershipRecordIsCounted(t *testing.T) {
	cfg := testConfig()
	cfg.IPSetMaxElements = 10
	fk := newFakeKernel()
	p, rec := newTestProxier(t, fk, cfg)
	for i := 0; i < 6; i++ {
		svc := servicetest.Service(fmt.Sprintf("np%d", i), fmt.Sprintf("10.96.0.%d", 30+i), servicetest.NodePort(int32(30000+i)), servicetest.CreatedAt(servicetest.Created.Add(time.Duration(i)*time.Minute)))
		p.Tracker().SetService(svc)
	}
	if res := p.Sync(); res.Err() != nil {
		t.Fatalf("a kernel write failed: %v", res.Err())
	}
	if got := fmt.Sprint(refusedServices(p)); got != "[default/np5]" {
		t.Errorf("refused %s, want the newest, [default/np5]", got)
	}
	if ev := drainEvents(rec); !strings.Contains(ev, "ServiceTooLarge") || !strings.Contains(ev, owned.SetOwned) {
		t.Errorf("events %q, want ServiceTooLarge naming %s", ev, owned.SetOwned)
	}
}

// programmed says whether the cluster IP's port 1000 (portsService's first)
// or port 80 has a virtual server on fk.
func programmed(fk *fakeKernel, clusterIP string, port uint16) bool {
	_, err := fk.ipvs.RealServers(ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr(clusterIP), Port: port})
	return err == nil
}

// One early Service with 100 external IPs and 640 ports wants 64,000 of a
// set's 65,536 members: admitted oldest first, it took them and refused
// every later Service on every node. Beyond its own cap (a quarter of a
// set) it is refused, the Event names the cap, and the Services after it
// are served.
func TestOneServiceCannotFillASet(t *testing.T) {
	fk := newFakeKernel()
	p, rec := newTestProxier(t, fk, testConfig())
	greedy := portsService("greedy", "tenant-a", "10.96.1.1", 640, servicetest.Created)
	for i := range 100 {
		greedy.Spec.ExternalIPs = append(greedy.Spec.ExternalIPs, fmt.Sprintf("203.0.113.%d", i+1))
	}
	p.Tracker().SetService(greedy)
	mustSync(t, p)
	var later []*v1.Service
	for i := range 20 {
		svc := portsService(fmt.Sprintf("later-%d", i), "tenant-b", fmt.Sprintf("10.96.2.%d", i+1), 100, servicetest.Created.Add(time.Duration(i+1)*time.Hour))
		later = append(later, svc)
		p.Tracker().SetService(svc)
	}
	mustSync(t, p)

	events := drainEvents(rec)
	if !strings.Contains(events, "ServiceTooLarge") || !strings.Contains(events, "--ipset-max-elements-per-service") {
		t.Errorf("events %q, want a ServiceTooLarge warning naming --ipset-max-elements-per-service", events)
	}
	if programmed(fk, "10.96.1.1", 1000) {
		t.Error("the Service of 64,000 virtual servers was programmed")
	}
	for _, svc := range later {
		if !programmed(fk, svc.Spec.ClusterIP, 1000) || !programmed(fk, svc.Spec.ClusterIP, 1099) {
			t.Errorf("%s/%s was not programmed beside the refused Service", svc.Namespace, svc.Name)
		}
	}
}

// While a set is full, the Services of a namespace beyond its share yield to
// another namespace's: which Service is refused no longer depends on age
// alone, and the refusal names the share. A namespace alone may go beyond
// its share while there is room.
func TestANamespaceBeyondItsShareYieldsWhenASetIsFull(t *testing.T) {
	cfg := testConfig()
	cfg.IPSetMaxElements = 40
	cfg.Limits.MaxSetEntriesPerService = 10
	cfg.Limits.SetEntriesPerNamespace = 20
	fk := newFakeKernel()
	p, rec := newTestProxier(t, fk, cfg)
	// Six Services of six ports in one namespace: 36 members of each of
	// KUBE-CLUSTER-IP, KUBE-IPVS-SERVICES and the ownership record, past
	// the namespace's share of 20 but within the sets' 40.
	for i := range 6 {
		p.Tracker().SetService(portsService(fmt.Sprintf("greedy-%d", i), "greedy", fmt.Sprintf("10.96.3.%d", i+1), 6, servicetest.Created.Add(time.Duration(i)*time.Minute)))
	}
	mustSync(t, p)
	if got := refusedServices(p); len(got) != 0 {
		t.Fatalf("refused %v while the sets had room", got)
	}
	drainEvents(rec)
	// A newer Service of another namespace does not fit: the greedy
	// namespace's youngest yields its room.
	p.Tracker().SetService(portsService("modest", "modest", "10.96.4.1", 6, servicetest.Created.Add(time.Hour)))
	mustSync(t, p)
	if got := fmt.Sprint(refusedServices(p)); got != "[greedy/greedy-5]" {
		t.Errorf("refused %s, want [greedy/greedy-5]", got)
	}
	if !programmed(fk, "10.96.4.1", 1000) {
		t.Error("the other namespace's Service was not programmed")
	}
	for i := range 5 {
		if ip := fmt.Sprintf("10.96.3.%d", i+1); !programmed(fk, ip, 1000) {
			t.Errorf("%s, within the sets, was not programmed", ip)
		}
	}
	if ev := drainEvents(rec); !strings.Contains(ev, "namespace greedy") || !strings.Contains(ev, "--ipset-max-elements-per-namespace") {
		t.Errorf("events %q, want the refusal to name the namespace's share", ev)
	}
}

// A Service beyond the real servers a Service may have is refused, naming
// the cap; and when the node's real servers are full, a namespace beyond
// its share yields to another namespace's Service.
func TestRealServersHaveAPerServiceCapAndANamespaceShare(t *testing.T) {
	cfg := testConfig()
	cfg.Limits.MaxRealServers = 25
	cfg.Limits.MaxRealServersPerService = 10
	cfg.Limits.RealServersPerNamespace = 10
	fk := newFakeKernel()
	p, rec := newTestProxier(t, fk, cfg)
	endpoints := func(n, from int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("10.244.9.%d@node2", from+i))
		}
		return out
	}
	service := func(name, ns, ip string, created time.Duration, n, from int) {
		svc := servicetest.Service(name, ip, servicetest.CreatedAt(servicetest.Created.Add(created)))
		svc.Namespace = ns
		p.Tracker().SetService(svc)
		p.Tracker().SetEndpointSlice(servicetest.Slice(svc, name+"-a", 8080, endpoints(n, from)...))
	}
	service("too-many", "a", "10.96.5.1", 0, 11, 1)
	for i := range 3 {
		service(fmt.Sprintf("a-%d", i), "a", fmt.Sprintf("10.96.5.%d", i+2), time.Duration(i+1)*time.Minute, 8, 20+10*i)
	}
	mustSync(t, p)
	if ev := drainEvents(rec); !strings.Contains(ev, "--ipvs-max-real-servers-per-service") {
		t.Errorf("events %q, want the 11-endpoint Service refused naming --ipvs-max-real-servers-per-service", ev)
	}
	if programmed(fk, "10.96.5.1", 80) {
		t.Error("the Service of 11 real servers was programmed")
	}
	// 24 of 25 real servers taken by namespace a, beyond its share of 10.
	service("b-0", "b", "10.96.6.1", time.Hour, 5, 100)
	mustSync(t, p)
	if !programmed(fk, "10.96.6.1", 80) {
		t.Error("namespace b's Service was not programmed")
	}
	if got := fmt.Sprint(refusedServices(p)); got != "[a/a-2]" {
		t.Errorf("refused %s, want [a/a-2] (namespace a's youngest, beyond its share)", got)
	}
	if ev := drainEvents(rec); !strings.Contains(ev, "--ipvs-max-real-servers") || !strings.Contains(ev, "--ipvs-max-real-servers-per-namespace") {
		t.Errorf("events %q, want the refusal to name --ipvs-max-real-servers and the namespace's share", ev)
	}
}
