package proxier

import (
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
)

// A periodic full sync of an unchanged cluster rebuilds no Service, yet
// still repairs what changed in the kernel behind our back.
func TestPeriodicFullSyncRepairsTheKernelWithoutRebuilding(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	if err := fk.ipvs.DeleteVirtualServer(webVS); err != nil {
		t.Fatal(err)
	}
	p.RequestFullSync()
	res := mustSync(t, p)
	if !res.Full || res.Services != 0 {
		t.Fatalf("full=%v, rebuilt %d Services; want a full sync rebuilding none", res.Full, res.Services)
	}
	if got := realServers(t, fk, webVS); len(got) != 1 {
		t.Fatalf("virtual server not restored: %v", got)
	}
	// A change of the node's addresses does rebuild every Service.
	fk.netif.SetHostAddresses(servicetest.Node1IP, servicetest.Node1IP6)
	p.RequestFullSync()
	if res := mustSync(t, p); res.Services != 2 { // and default/kubernetes
		t.Fatalf("after the node's addresses changed, rebuilt %d Services, want 2", res.Services)
	}
}

// Every sync reports every health-check node port and Local Service
// without local endpoints, including those it did not rebuild.
func TestPartialSyncReportsServicesItDidNotRebuild(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	lb := servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, "203.0.113.20"), servicetest.ExternalLocal(31000))
	p.Tracker().SetService(lb)
	p.Tracker().SetEndpointSlice(servicetest.Slice(lb, "lb-a", 8080, "10.244.2.7@node2"))
	mustSync(t, p)
	other := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(other)
	res := mustSync(t, p)
	if res.Full || res.Services != 1 {
		t.Fatalf("full=%v services=%d", res.Full, res.Services)
	}
	if res.HealthCheckNodePorts[svcName("lb")] != 31000 || res.LocalReadyEndpoints[svcName("lb")] != 0 || res.NoLocalEndpoints[ipvsproxy.NoLocalKey{Family: v1.IPv4Protocol, Policy: "external"}] != 1 {
		t.Fatalf("summary %v %v %v", res.HealthCheckNodePorts, res.LocalReadyEndpoints, res.NoLocalEndpoints)
	}
	p.Tracker().DeleteService("default", "lb")
	res = mustSync(t, p)
	if len(res.HealthCheckNodePorts) != 0 || res.NoLocalEndpoints[ipvsproxy.NoLocalKey{Family: v1.IPv4Protocol, Policy: "external"}] != 0 {
		t.Fatalf("after deletion: %v %v", res.HealthCheckNodePorts, res.NoLocalEndpoints)
	}
}
