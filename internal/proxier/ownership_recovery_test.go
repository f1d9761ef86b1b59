package proxier

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"k8s.io/client-go/tools/record"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
)

// setupOwnershipLoss programs a routed cluster IP, an external IP (bound on
// kube-ipvs0) and a node port, and returns their keys.
func setupOwnershipLoss(t *testing.T, fk *fakeKernel, cfg ipvsproxy.Config) (*Proxier, []ipvs.VirtualServerKey) {
	p, _ := newTestProxier(t, fk, cfg)
	return p, programOwnedObjects(t, fk, p)
}

// programOwnedObjects is setupOwnershipLoss on a proxier built by the caller
// (over fk's objects, through whatever kernel wrapper it needs).
func programOwnedObjects(t *testing.T, fk *fakeKernel, p *Proxier) []ipvs.VirtualServerKey {
	svc := servicetest.Service("dns", "10.96.0.10", withExternalIPs("203.0.113.10"), servicetest.NodePort(30053))
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "dns-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	keys := []ipvs.VirtualServerKey{
		{Protocol: ipvs.TCP, Address: netip.MustParseAddr("10.96.0.10"), Port: 80},
		{Protocol: ipvs.TCP, Address: netip.MustParseAddr("203.0.113.10"), Port: 80},
		{Protocol: ipvs.TCP, Address: servicetest.Node1IP, Port: 30053},
	}
	for _, k := range keys {
		if got := realServers(t, fk, k); len(got) != 1 {
			t.Fatalf("%s before the loss: %v", k, got)
		}
	}
	return keys
}

func checkRecovered(t *testing.T, fk *fakeKernel, p *Proxier, keys []ipvs.VirtualServerKey, how string) {
	t.Helper()
	res := mustSync(t, p)
	for _, k := range keys {
		if got := realServers(t, fk, k); len(got) != 1 {
			t.Errorf("after %s: %s has %v, want its endpoint (it must stay ours)", how, k, got)
		}
		set, e := owned.Record(k)
		entries, _ := fk.ipset.Entries(set)
		if !slices.Contains(entries, e) {
			t.Errorf("after %s: the record of %s was not written again: %v", how, k, entries)
		}
	}
	members, _ := fk.ipset.Entries(owned.SetClusterIP)
	if !slices.Contains(members, ipset.Entry{IP: netip.MustParseAddr("10.96.0.10"), Protocol: "tcp", Port: 80}) {
		t.Errorf("after %s: the cluster IP left %s: %v", how, owned.SetClusterIP, members)
	}
	if res.WriteErrors["ipvs"] != 0 {
		t.Errorf("after %s: virtual server writes failed: %v", how, res.WriteErrors)
	}
}

// The ownership record flushed by hand: the next full sync keeps every
// virtual server a current Service names (the routed cluster IP, the bound
// external IP, the node port) and records them again.
func TestOwnershipSurvivesAFlushedRecord(t *testing.T) {
	fk := newFakeKernel()
	p, keys := setupOwnershipLoss(t, fk, routedConfig())
	entries, _ := fk.ipset.Entries(owned.SetOwned)
	for _, e := range entries {
		if err := fk.ipset.DeleteEntry(owned.SetOwned, e); err != nil {
			t.Fatal(err)
		}
	}
	p.RequestFullSync()
	checkRecovered(t, fk, p, keys, "ipset flush "+owned.SetOwned)
}

// A restart with a larger --ipset-max-elements replaces every owned set,
// the record's included: the new process reads the old record before the
// replace and keeps every virtual server.
func TestOwnershipSurvivesRaisingMaxElements(t *testing.T) {
	fk := newFakeKernel()
	cfg := routedConfig()
	cfg.IPSetMaxElements = 1024
	_, keys := setupOwnershipLoss(t, fk, cfg)
	cfg.IPSetMaxElements = 65536
	restarted, _ := newTestProxier(t, fk, cfg)
	svc := servicetest.Service("dns", "10.96.0.10", withExternalIPs("203.0.113.10"), servicetest.NodePort(30053))
	restarted.Tracker().SetService(svc)
	restarted.Tracker().SetEndpointSlice(servicetest.Slice(svc, "dns-a", 8080, "10.244.1.5@node1"))
	checkRecovered(t, fk, restarted, keys, "a restart with a larger --ipset-max-elements")
	sets, _ := fk.ipset.Sets()
	for _, s := range sets {
		if s.Name == owned.SetOwned && s.MaxElem != 65536 {
			t.Errorf("%s kept maxelem %d", owned.SetOwned, s.MaxElem)
		}
	}
}

// A crash half-way through that replace leaves the record new and empty:
// the restarted process keeps the cluster IP (a current Service's, inside
// our Service CIDR route), so pods and DNS keep working.
func TestOwnershipOfClusterIPsSurvivesALostRecord(t *testing.T) {
	fk := newFakeKernel()
	cfg := routedConfig()
	_, keys := setupOwnershipLoss(t, fk, cfg)
	if err := fk.ipset.DestroySet(owned.SetOwned); err != nil {
		t.Fatal(err)
	}
	if err := fk.ipset.CreateSet(ipset.Set{Name: owned.SetOwned, Type: ipset.HashIPPort, Family: ipset.IPv4, MaxElem: 65536}); err != nil {
		t.Fatal(err)
	}
	restarted, _ := newTestProxier(t, fk, cfg)
	svc := servicetest.Service("dns", "10.96.0.10", withExternalIPs("203.0.113.10"), servicetest.NodePort(30053))
	restarted.Tracker().SetService(svc)
	restarted.Tracker().SetEndpointSlice(servicetest.Slice(svc, "dns-a", 8080, "10.244.1.5@node1"))
	checkRecovered(t, fk, restarted, keys[:1], "a restart with the record lost")
}

// Evidence is not a licence: an operator's virtual server in the Service
// range on an address no Service holds stays foreign.
func TestOwnershipEvidenceLeavesOthersAlone(t *testing.T) {
	fk := newFakeKernel()
	p, _ := setupOwnershipLoss(t, fk, routedConfig())
	theirs := ipvs.VirtualServer{VirtualServerKey: ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("10.96.0.99"), Port: 80}, Scheduler: "rr"}
	if err := fk.ipvs.AddVirtualServer(theirs); err != nil {
		t.Fatal(err)
	}
	entries, _ := fk.ipset.Entries(owned.SetOwned)
	for _, e := range entries {
		fk.ipset.DeleteEntry(owned.SetOwned, e)
	}
	p.RequestFullSync()
	mustSync(t, p)
	vss, _ := fk.ipvs.VirtualServers()
	for _, vs := range vss {
		if vs.VirtualServerKey == theirs.VirtualServerKey && vs.Scheduler != "rr" {
			t.Errorf("the operator's virtual server was rewritten: %+v", vs)
		}
	}
	if !strings.Contains(fk.ipvs.Dump(), "10.96.0.99") {
		t.Error("the operator's virtual server was deleted")
	}
}

// unreadableIPVS fails the listing of the virtual servers while failing is
// set: a full read that breaks half-way.
type unreadableIPVS struct {
	ipvs.Interface
	failing *bool
}

func (u unreadableIPVS) VirtualServers() ([]ipvs.VirtualServer, error) {
	if *u.failing {
		return nil, errors.New("netlink: no buffer space available")
	}
	return u.Interface.VirtualServers()
}

// The view is let go before each full read; when the read fails, what the
// view held must still count as ours at the next one. With the record
// flushed, the external IP and the node port have no other evidence: losing
// that memory would make them foreign, each with a PortConflict Event.
func TestOwnershipSurvivesAFlushedRecordAndAFailedRead(t *testing.T) {
	fk := newFakeKernel()
	failing := false
	k := fk.kernel()
	k.IPVS = unreadableIPVS{k.IPVS, &failing}
	p, err := New(routedConfig(), servicetest.ThisNode, k, record.NewFakeRecorder(100))
	if err != nil {
		t.Fatal(err)
	}
	p.Tracker().SetService(apiServerService())
	keys := programOwnedObjects(t, fk, p)
	entries, _ := fk.ipset.Entries(owned.SetOwned)
	for _, e := range entries {
		if err := fk.ipset.DeleteEntry(owned.SetOwned, e); err != nil {
			t.Fatal(err)
		}
	}
	failing = true
	p.RequestFullSync()
	if res := p.Sync(); res.WriteErrors[string(snapshot.ObjectRead)] == 0 {
		t.Fatalf("the full read did not fail: %+v", res.WriteErrors)
	}
	failing = false
	checkRecovered(t, fk, p, keys, "a flushed record and a failed full read")
}
