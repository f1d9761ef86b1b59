package proxier

import (
	"errors"
	"github.com/ipvsproxy/ipvsproxy/internal/cleanup"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
)

// A virtual server someone else made at an address:port a Service names is
// never adopted, rewritten or emptied, across full syncs and a restart; the
// Service gets a PortConflict Event and programs nothing for that key
// (its members would apply to the other owner's traffic). The old rule took every virtual server on a
// kube-ipvs0 address for ours, and the Service's own address made it so.
func TestForeignVirtualServerIsNeverAdopted(t *testing.T) {
	fk := newFakeKernel()
	foreign := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("203.0.113.5"), Port: 80}
	addForeign(t, fk, foreign)
	before := fk.ipvs.Dump()
	world := func(p *Proxier) {
		svc := servicetest.Service("web", "10.96.0.10", func(s *v1.Service) { s.Spec.ExternalIPs = []string{"203.0.113.5"} })
		p.Tracker().SetService(svc)
		p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	}
	p, rec := newTestProxier(t, fk, testConfig())
	world(p)
	mustSync(t, p)
	check := func(when string) {
		t.Helper()
		if got := vsDump(fk, foreign); got != vsDumpOf(before, foreign) {
			t.Fatalf("%s: the foreign virtual server changed:\n%s\nwas\n%s", when, got, vsDumpOf(before, foreign))
		}
		if got := realServers(t, fk, webVS); len(got) != 1 {
			t.Fatalf("%s: the Service's cluster IP: %v", when, got)
		}
		dump := fk.ipset.Dump()
		for _, set := range []string{"KUBE-IPVS-IPS", "KUBE-IPVS-SERVICES", "KUBE-EXTERNAL-IP", "KUBE-IPVS-OWNED"} {
			if strings.Contains(after(dump, "set "+set+" "), "203.0.113.5") {
				t.Fatalf("%s: %s holds the foreign key:\n%s", when, set, dump)
			}
		}
		if addrs, _ := fk.netif.DummyAddresses(); len(addrs) != 1 || addrs[0] != webVS.Address {
			t.Fatalf("%s: bound %v", when, addrs)
		}
	}
	check("first sync")
	if ev := drainEvents(rec); !strings.Contains(ev, "Warning PortConflict ExternalIP TCP 203.0.113.5:80 is already used by a virtual server ipvsproxy did not create") {
		t.Fatalf("events: %q", ev)
	}
	p.needFull = true
	mustSync(t, p)
	check("full sync")
	p2, _ := newTestProxier(t, fk, testConfig())
	world(p2)
	writes := fk.writes()
	if res := mustSync(t, p2); res.Writes != 0 || fk.writes() != writes {
		t.Fatalf("restart wrote %d", fk.writes()-writes)
	}
	check("restart")

	// One that appears after the last full read: found at the create.
	late := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("203.0.113.6"), Port: 80}
	addForeign(t, fk, late)
	lateBefore := vsDump(fk, late)
	api := servicetest.Service("api", "10.96.0.11", func(s *v1.Service) { s.Spec.ExternalIPs = []string{"203.0.113.6"} })
	p2.Tracker().SetService(api)
	p2.Tracker().SetEndpointSlice(servicetest.Slice(api, "api-a", 8080, "10.244.1.5@node1"))
	if res := mustSync(t, p2); res.Full {
		t.Fatal("want a partial sync")
	}
	p2.needFull = true
	mustSync(t, p2)
	if got := vsDump(fk, late); got != lateBefore {
		t.Fatalf("the late foreign virtual server changed:\n%s\nwas\n%s", got, lateBefore)
	}
	if dump := fk.ipset.Dump(); strings.Contains(dump, "203.0.113.6") {
		t.Fatalf("members for the late foreign key:\n%s", dump)
	}

	// The owner removes it: the Service gets the key.
	fk.ipvs.DeleteVirtualServer(foreign)
	p2.needFull = true
	mustSync(t, p2)
	if got := realServers(t, fk, foreign); len(got) != 1 || got[ep1] != 1 {
		t.Fatalf("after the foreign one left: %v", got)
	}
	if err := cleanup.Installed(fk.kernel(), testConfig().Families); err != nil {
		t.Fatal(err)
	}
	if got := vsDump(fk, late); got != lateBefore {
		t.Fatalf("cleanup changed the foreign virtual server:\n%s", got)
	}
}

// addForeign creates someone else's virtual server with one real server.
func addForeign(t *testing.T, fk *fakeKernel, k ipvs.VirtualServerKey) {
	t.Helper()
	if err := fk.ipvs.AddVirtualServer(ipvs.VirtualServer{VirtualServerKey: k, Scheduler: "rr"}); err != nil {
		t.Fatal(err)
	}
	if err := fk.ipvs.AddRealServer(k, ipvs.RealServer{RealServerKey: ipvs.RealServerKey{Address: netip.MustParseAddr("192.0.2.9"), Port: 80}, Weight: 3}); err != nil {
		t.Fatal(err)
	}
}

// vsDump is k's part of the IPVS fake's dump.
func vsDump(fk *fakeKernel, k ipvs.VirtualServerKey) string { return vsDumpOf(fk.ipvs.Dump(), k) }

func vsDumpOf(dump string, k ipvs.VirtualServerKey) string {
	var out []string
	in := false
	for _, line := range strings.Split(dump, "\n") {
		if !strings.HasPrefix(line, " ") {
			in = strings.Contains(line, k.String())
		}
		if in {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// NodePort virtual servers on an address the node no longer has are ours
// and go; the old rule only owned ones on current node
// addresses, so they stayed forever.
func TestNodePortOnVanishedNodeAddressIsRemoved(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	svc := servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080))
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	old := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: servicetest.Node1IP, Port: 30080}
	if got := realServers(t, fk, old); len(got) != 1 {
		t.Fatalf("node port: %v", got)
	}
	// The node's address changes (DHCP, a re-IP).
	newIP := netip.MustParseAddr("198.51.100.11")
	fk.netif.SetHostAddresses(netip.MustParseAddr("127.0.0.1"), newIP)
	p.needFull = true
	mustSync(t, p)
	if _, err := fk.ipvs.RealServers(old); !errors.Is(err, ipvs.ErrNotFound) {
		t.Fatalf("%s on the vanished address is still there: %v", old, err)
	}
	if got := realServers(t, fk, ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: newIP, Port: 30080}); len(got) != 1 {
		t.Fatalf("node port on the new address: %v", got)
	}
	if dump := fk.ipset.Dump(); strings.Contains(dump, servicetest.Node1IP.String()+",") {
		t.Fatalf("the record of the old one is left:\n%s", dump)
	}
}

// A node where kube-proxy's IPVS mode ran (its sets of the names ipvsproxy
// shares, no record): its virtual servers are adopted once and recorded; a
// restart after that writes nothing, and what the adoption rule would not
// take stays foreign.
func TestLegacyInstallIsAdoptedAndRecordedOnce(t *testing.T) {
	fk := newFakeKernel()
	fk.ipset.CreateSet(ipset.Set{Name: owned.SetClusterIP, Type: ipset.HashIPPort, Family: ipset.IPv4})
	fk.netif.EnsureDummy()
	fk.netif.AddDummyAddress(webVS.Address)
	fk.ipvs.AddVirtualServer(ipvs.VirtualServer{VirtualServerKey: webVS, Scheduler: "twos"})
	fk.ipvs.AddRealServer(webVS, ipvs.RealServer{RealServerKey: ep1, Weight: 1})
	stale := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: servicetest.Node1IP, Port: 30999}
	fk.ipvs.AddVirtualServer(ipvs.VirtualServer{VirtualServerKey: stale, Scheduler: "twos"})
	other := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("192.0.2.50"), Port: 80}
	fk.ipvs.AddVirtualServer(ipvs.VirtualServer{VirtualServerKey: other, Scheduler: "rr"})
	p, _ := newTestProxier(t, fk, testConfig())
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	if _, err := fk.ipvs.RealServers(stale); !errors.Is(err, ipvs.ErrNotFound) {
		t.Fatalf("the old version's stale node port should be gone: %v", err)
	}
	if _, err := fk.ipvs.RealServers(other); err != nil {
		t.Fatalf("a virtual server the old rule did not own was removed: %v", err)
	}
	if dump := fk.ipset.Dump(); !strings.Contains(after(dump, "set KUBE-IPVS-OWNED "), "10.96.0.10,tcp:80") {
		t.Fatalf("adopted virtual server not recorded:\n%s", dump)
	}
	writes := fk.writes()
	p2, _ := newTestProxier(t, fk, testConfig())
	p2.Tracker().SetService(svc)
	p2.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	if res := mustSync(t, p2); res.Writes != 0 || fk.writes() != writes {
		t.Fatalf("restart after adoption wrote %d", fk.writes()-writes)
	}
}

// A node that never ran ipvsproxy adopts nothing, even on the old rule's
// addresses.
func TestFreshNodeAdoptsNothing(t *testing.T) {
	fk := newFakeKernel()
	mine := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: servicetest.Node1IP, Port: 30500}
	addForeign(t, fk, mine)
	before := fk.ipvs.Dump()
	p, _ := newTestProxier(t, fk, testConfig())
	mustSync(t, p)
	if got := fk.ipvs.Dump(); got != before {
		t.Fatalf("changed:\n%s", got)
	}
}

// A record set of the wrong type (made by hand, or a future layout) is no
// reason to treat our virtual servers as foreign: the old rule adopts them,
// the set is replaced and they are recorded again.
func TestWrongTypeRecordSetIsReplacedAndOwnershipKept(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	if err := fk.ipset.DestroySet(owned.SetOwned); err != nil {
		t.Fatal(err)
	}
	fk.ipset.CreateSet(ipset.Set{Name: owned.SetOwned, Type: ipset.HashIP, Family: ipset.IPv4})
	p2, _ := newTestProxier(t, fk, testConfig())
	p2.Tracker().SetService(svc)
	p2.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p2)
	if got := realServers(t, fk, webVS); len(got) != 1 {
		t.Fatalf("real servers %v", got)
	}
	if dump := fk.ipset.Dump(); !strings.Contains(dump, "set KUBE-IPVS-OWNED hash:ip,port inet\n  10.96.0.10,tcp:80\n") {
		t.Fatalf("not recorded again:\n%s", dump)
	}
}

// A record set smaller than --ipset-max-elements is replaced; until then
// its records still say what is ours. On a dual-stack node whose other
// family's record set is large enough, no old rule adopts anything: an
// external IP, which has no other evidence (a Service author chooses it),
// would be foreign after the restart that raised the flag without its
// record, and its Service would lose it.
func TestRecordsOfAReplacedRecordSetKeepOwnership(t *testing.T) {
	fk := newFakeKernel()
	cfg := testConfig()
	cfg.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	p, _ := newTestProxier(t, fk, cfg)
	external := webVSFor("203.0.113.10")
	svc := servicetest.Service("web", "10.96.0.10", func(s *v1.Service) { s.Spec.ExternalIPs = []string{external.Address.String()} })
	slice := servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(slice)
	mustSync(t, p)
	cfg.IPSetMaxElements = 2 * ipset.DefaultMaxElem
	// The IPv6 record set (empty) already as large as the flag asks.
	records6 := owned.SetName(owned.SetOwned, v1.IPv6Protocol)
	if err := fk.ipset.DestroySet(records6); err != nil {
		t.Fatal(err)
	}
	if err := fk.ipset.CreateSet(ipset.Set{Name: records6, Type: ipset.HashIPPort, Family: ipset.IPv6, MaxElem: cfg.IPSetMaxElements}); err != nil {
		t.Fatal(err)
	}
	p2, _ := newTestProxier(t, fk, cfg)
	p2.Tracker().SetService(svc)
	p2.Tracker().SetEndpointSlice(slice)
	if res := mustSync(t, p2); len(res.WriteErrors) != 0 {
		t.Fatalf("restart: write errors %v", res.WriteErrors)
	}
	sets, err := fk.ipset.Sets()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sets {
		if s.Name == owned.SetOwned && s.MaxElem != cfg.IPSetMaxElements {
			t.Fatalf("%s kept maxelem %d, want it replaced with %d", s.Name, s.MaxElem, cfg.IPSetMaxElements)
		}
	}
	records, err := fk.ipset.Entries(owned.SetOwned)
	if err != nil {
		t.Fatal(err)
	}
	if e := recordEntry(external); !slices.Contains(records, e.Entry) {
		t.Fatalf("records %v lack %s's: it was taken for someone else's", records, external)
	}
	if got := realServers(t, fk, external); len(got) != 1 {
		t.Fatalf("%s real servers %v", external, got)
	}
}
