package proxier

import (
	"sync/atomic"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
)

// The daemon's informers start before the kernel is set up: what they fed
// the sources before the proxier existed is in its first sync, and the hook
// set once it exists sees each change after.
func TestChangesFedBeforeTheProxierExistsReachItsFirstSync(t *testing.T) {
	src := NewSources(servicetest.ThisNode)
	svc := servicetest.Service("web", "10.96.0.10")
	src.Tracker().SetService(apiServerService())
	src.Tracker().SetService(svc)
	src.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1", "10.244.2.7@node2"))

	fk := newFakeKernel()
	p, err := NewFromSources(testConfig(), src, fk.kernel(), nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.trigger:
	default:
		t.Fatal("the changes fed before the proxier asked for no sync")
	}
	var queued atomic.Int32
	p.SetOnQueued(func() { queued.Add(1) })
	if res := mustSync(t, p); !res.Full {
		t.Fatalf("first sync not full: %+v", res)
	}
	if got := realServers(t, fk, webVS); len(got) != 2 || got[ep1] != 1 || got[ep2] != 1 {
		t.Fatalf("real servers %v", got)
	}
	src.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	if queued.Load() != 1 {
		t.Fatalf("the hook saw %d changes after it was set, want 1", queued.Load())
	}
	mustSync(t, p)
	if got := realServers(t, fk, webVS); len(got) != 1 {
		t.Fatalf("real servers after the change %v", got)
	}
}
