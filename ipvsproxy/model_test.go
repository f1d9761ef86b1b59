package ipvsproxy

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// What the writer reports changes the desired state only through the
// model: a route not in place binds the cluster IPs it routes (with their
// KUBE-IPVS-IPS members), one in place again unbinds them, and someone
// else's virtual server takes its key from the Service with what it
// counted for. Each is recorded as touched, so the same sync writes it, and
// TakeIn says whether anything changed.
func TestModelTakesInWhatTheWriterFound(t *testing.T) {
	serviceRange := netip.MustParsePrefix("10.96.0.0/16")
	cfg := testConfig()
	cfg.ServiceCIDRs = []netip.Prefix{serviceRange}
	tracker := NewChangeTracker(servicetest.ThisNode, func() {})
	m := NewModel(cfg, servicetest.ThisNode, tracker, NewClusterNodes(func() {}), 2)
	svc := servicetest.Service("web", "10.96.0.10", func(s *v1.Service) { s.Spec.ExternalIPs = []string{"203.0.113.5"} })
	tracker.SetService(svc)
	tracker.SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	host := []netip.Addr{servicetest.Node1IP}
	tk := NewTouched()
	res := m.Update(Input{Changes: tracker.Drain(), Full: true, Observed: Observed{HostAddresses: host}}, &tk)
	if !res.Services[types.NamespacedName{Namespace: "default", Name: "web"}] {
		t.Fatalf("rebuilt %v, want default/web", res.Services)
	}
	d := m.Desired()
	clusterIP, externalIP := netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("203.0.113.5")
	ipsMember := SetEntryKey{Set: owned.SetName(owned.SetIPVSIPs, FamilyOf(clusterIP)), Entry: ipset.Entry{IP: clusterIP}}
	if !slices.Equal(d.Routes, []netip.Prefix{serviceRange}) || d.WantsAddress(clusterIP) || !d.WantsAddress(externalIP) {
		t.Fatalf("routes %v, cluster IP bound %v, external IP bound %v: want the range routed, the external IP alone bound", d.Routes, d.WantsAddress(clusterIP), d.WantsAddress(externalIP))
	}

	// The route is not in place: the cluster IP is bound one by one.
	tk = NewTouched()
	if !m.TakeIn(Observed{Routes: map[netip.Prefix]bool{serviceRange: false}}, tk) {
		t.Fatal("a route not in place changed nothing")
	}
	if !d.WantsAddress(clusterIP) || d.SetEntryRefs(ipsMember) != 1 || !tk.Addresses[clusterIP] || !tk.Entries[ipsMember] {
		t.Fatalf("cluster IP bound %v, KUBE-IPVS-IPS refs %d, touched %v %v", d.WantsAddress(clusterIP), d.SetEntryRefs(ipsMember), tk.Addresses, tk.Entries)
	}
	if m.TakeIn(Observed{Routes: map[netip.Prefix]bool{serviceRange: false}}, NewTouched()) {
		t.Fatal("the same report again changed something")
	}
	tk = NewTouched()
	if !m.TakeIn(Observed{Routes: map[netip.Prefix]bool{serviceRange: true}}, tk) || d.WantsAddress(clusterIP) || d.SetEntryRefs(ipsMember) != 0 || !tk.Addresses[clusterIP] {
		t.Fatalf("route in place again: cluster IP still bound %v, KUBE-IPVS-IPS refs %d", d.WantsAddress(clusterIP), d.SetEntryRefs(ipsMember))
	}

	// Someone else's virtual server at the external IP's key.
	theirs := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: externalIP, Port: 80}
	if d.VirtualServer(theirs) == nil {
		t.Fatalf("no virtual server at %s to lose:\n%s", theirs, d.Dump())
	}
	tk = NewTouched()
	if !m.TakeIn(Observed{FoundForeign: []ipvs.VirtualServerKey{theirs}}, tk) {
		t.Fatal("someone else's virtual server changed nothing")
	}
	if d.VirtualServer(theirs) != nil || d.WantsAddress(externalIP) || !tk.VirtualServers[theirs] || !tk.Addresses[externalIP] {
		t.Fatalf("after someone else's was found: winner %v, external IP bound %v, touched %v %v", d.VirtualServer(theirs), d.WantsAddress(externalIP), tk.VirtualServers, tk.Addresses)
	}
	// A full read that no longer finds it gives the key back.
	tk = NewTouched()
	m.Update(Input{Changes: tracker.Drain(), Full: true, Observed: Observed{HostAddresses: host, Foreign: map[ipvs.VirtualServerKey]bool{}}}, &tk)
	if d.VirtualServer(theirs) == nil || !d.WantsAddress(externalIP) {
		t.Fatalf("after a read without it: winner %v, external IP bound %v", d.VirtualServer(theirs), d.WantsAddress(externalIP))
	}
}

// The cluster-IP index compares each Service with what it recorded of it,
// which the tracker keeps beside the current one: a cluster IP a Service
// moves away from, or that goes with a deleted Service, leaves the index,
// and the tracker forgets a deleted Service once the index has.
func TestClusterIPIndexFollowsTheTrackersServices(t *testing.T) {
	tracker := NewChangeTracker(servicetest.ThisNode, func() {})
	m := NewModel(testConfig(), servicetest.ThisNode, tracker, NewClusterNodes(func() {}), 2)
	update := func() {
		t.Helper()
		tk := NewTouched()
		m.Update(Input{Changes: tracker.Drain(), Observed: Observed{HostAddresses: []netip.Addr{servicetest.Node1IP}}}, &tk)
	}
	web := types.NamespacedName{Namespace: "default", Name: "web"}
	owners := func(addr string) []types.NamespacedName { return m.clusterIPs.Owners[netip.MustParseAddr(addr)] }

	tracker.SetService(servicetest.Service("web", "10.96.0.10"))
	update()
	if got := owners("10.96.0.10"); !slices.Equal(got, []types.NamespacedName{web}) {
		t.Fatalf("owners of 10.96.0.10: %v", got)
	}
	tracker.SetService(servicetest.Service("web", "10.96.0.11"))
	update()
	if got, moved := owners("10.96.0.10"), owners("10.96.0.11"); len(got) != 0 || !slices.Equal(moved, []types.NamespacedName{web}) {
		t.Fatalf("after the move: owners of the old cluster IP %v, of the new one %v", got, moved)
	}
	tracker.DeleteService("default", "web")
	if tracker.Service(web) != nil || len(tracker.ServiceNames()) != 0 || len(tracker.CurrentServices()) != 0 {
		t.Fatal("a deleted Service is still the tracker's current one")
	}
	update()
	if got := owners("10.96.0.11"); len(got) != 0 {
		t.Fatalf("a deleted Service still owns its cluster IP: %v", got)
	}
	if len(tracker.services) != 0 {
		t.Fatalf("the tracker still holds the deleted Service once indexed: %v", tracker.services)
	}
}
