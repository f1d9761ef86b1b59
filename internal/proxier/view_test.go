package proxier

import (
	"slices"
	"testing"
	"unsafe"

	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
)

// A virtual server whose real servers the kernel holds exactly keeps the
// desired state's own list in the view, after the cold sync and after a
// full re-check; when the view must change (a drain at weight 0) it copies
// the list first, so the built state is never written.
func TestViewSharesAgreeingRealServersAndCopiesBeforeWriting(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1", "10.244.2.7@node2"))
	mustSync(t, p)
	sharing := func(when string) ipvsproxy.RealServerList {
		t.Helper()
		kv, want := p.view.virtualServers[webVS], p.desired.VirtualServer(webVS).RealServers
		if kv == nil || len(want) != 2 || !kv.shared() || &kv.wanted[0] != &want[0] {
			t.Fatalf("%s: the view does not share the desired real servers (view %v, shared %v; desired %v)", when, kv.wanted, kv.shared(), want)
		}
		return want
	}
	sharing("after the cold sync")
	p.RequestFullSync()
	if res := mustSync(t, p); !res.Full {
		t.Fatal("want a full sync")
	}
	want := sharing("after a full re-check")
	built := slices.Clone(want)

	if err := fk.ipvs.SetConnections(webVS, ep2, 3, 1); err != nil {
		t.Fatal(err)
	}
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)
	if !slices.Equal(want, built) {
		t.Fatalf("the built state was written through the view: %+v, built as %+v", want, built)
	}
	kv := p.view.virtualServers[webVS]
	if rs, ok := kv.realServer(ep2); kv.shared() || !ok || rs.Weight != 0 {
		t.Fatalf("want the view's own list with ep2 draining at weight 0, got %v (shared %v)", slices.Collect(kv.eachRealServer()), kv.shared())
	}
	if got := realServers(t, fk, webVS); len(got) != 2 || got[ep2] != 0 {
		t.Fatalf("kernel: want ep2 at weight 0 beside ep1, got %v", got)
	}
}

// The view holds one of these per virtual server of the node, 50,000 at
// 50,000 Services: the shared list and the view's own one take the room of
// one list and a pointer, with no flags beside them.
func TestKernelVirtualServerStaysCompact(t *testing.T) {
	if size := unsafe.Sizeof(kernelVirtualServer{}); size > 96 {
		t.Errorf("kernelVirtualServer is %d bytes, want at most 96", size)
	}
}
