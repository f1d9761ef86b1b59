package proxier

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// sliceNames lists the slices the tracker files under Service name.
func sliceNames(tr *ipvsproxy.ChangeTracker, name string) []string {
	_, got := tr.Input(svcName(name))
	var out []string
	for _, s := range got {
		out = append(out, s.Name)
	}
	return out
}

// A slice whose kubernetes.io/service-name label changes, or goes, leaves
// the Service it was filed under, and that Service is marked for a rebuild;
// a delete finds the slice where it was filed, whatever the tombstone says.
// The handler takes the daemon's compact slices and API objects alike.
func TestTrackerRefilesRelabelledSlice(t *testing.T) {
	t.Run("API objects", func(t *testing.T) {
		testTrackerRefilesRelabelledSlice(t, func(s *discovery.EndpointSlice) any { return s })
	})
	t.Run("compact", func(t *testing.T) {
		testTrackerRefilesRelabelledSlice(t, func(s *discovery.EndpointSlice) any { return ipvsproxy.CompactEndpointSlice(s) })
	})
}

func testTrackerRefilesRelabelledSlice(t *testing.T, as func(*discovery.EndpointSlice) any) {
	tr := ipvsproxy.NewChangeTracker(servicetest.ThisNode, nil)
	h := tr.EndpointSliceHandler()
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { h.OnAdd(as(obj.(*discovery.EndpointSlice)), false) },
		UpdateFunc: func(old, obj any) { h.OnUpdate(as(old.(*discovery.EndpointSlice)), as(obj.(*discovery.EndpointSlice))) },
		DeleteFunc: func(obj any) {
			d := obj.(cache.DeletedFinalStateUnknown)
			h.OnDelete(cache.DeletedFinalStateUnknown{Key: d.Key, Obj: as(d.Obj.(*discovery.EndpointSlice))})
		},
	}
	web, api := servicetest.Service("web", "10.96.0.10"), servicetest.Service("api", "10.96.0.11")
	first := servicetest.Slice(web, "shared-a", 8080, "10.244.1.5@node1")
	handler.OnAdd(first, false)
	tr.Drain()

	relabelled := first.DeepCopy()
	relabelled.Labels[discovery.LabelServiceName] = api.Name
	handler.OnUpdate(first, relabelled)
	if got := sliceNames(tr, "web"); len(got) != 0 {
		t.Fatalf("web still has %v after its slice was relabelled to api", got)
	}
	if got := sliceNames(tr, "api"); len(got) != 1 {
		t.Fatalf("api has %v, want the relabelled slice", got)
	}
	if p := tr.Drain(); !p.Services[svcName("web")] || !p.Services[svcName("api")] {
		t.Fatalf("pending %v, want both web (lost a slice) and api (gained one)", p.Services)
	}

	unlabelled := relabelled.DeepCopy()
	delete(unlabelled.Labels, discovery.LabelServiceName)
	handler.OnUpdate(relabelled, unlabelled)
	if got := sliceNames(tr, "api"); len(got) != 0 {
		t.Fatalf("api still has %v after its slice lost the label", got)
	}
	if p := tr.Drain(); !p.Services[svcName("api")] {
		t.Fatalf("pending %v, want api rebuilt", p.Services)
	}

	// Filed again under web, then deleted through a tombstone whose labels
	// are stale (an older state that named api).
	handler.OnUpdate(unlabelled, first)
	handler.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/shared-a", Obj: relabelled})
	if got := sliceNames(tr, "web"); len(got) != 0 {
		t.Fatalf("web still has %v after the slice was deleted", got)
	}
	if keys := tr.SliceKeys().ListKeys(); len(keys) != 0 {
		t.Fatalf("tracker keeps slices %v", keys)
	}
}

// On the fakes: a slice relabelled from web to api takes its real server
// out of web's virtual server at the next sync (partial, as the informer
// would trigger it), and one that loses its label leaves api's too.
func TestRelabelledSliceLeavesTheOldServicesRealServers(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	handler := p.Tracker().EndpointSliceHandler()
	web, api := servicetest.Service("web", "10.96.0.10"), servicetest.Service("api", "10.96.0.11")
	apiVS := webVSFor("10.96.0.11")
	p.Tracker().SetService(web)
	p.Tracker().SetService(api)
	moving := servicetest.Slice(web, "moving", 8080, "10.244.1.5@node1")
	handler.OnAdd(moving, false)
	handler.OnAdd(servicetest.Slice(web, "staying", 8080, "10.244.2.7@node2"), false)
	mustSync(t, p)
	if got := realServers(t, fk, webVS); len(got) != 2 {
		t.Fatalf("web real servers before the relabel: %v", got)
	}

	relabelled := moving.DeepCopy()
	relabelled.Labels[discovery.LabelServiceName] = api.Name
	handler.OnUpdate(moving, relabelled)
	if res := mustSync(t, p); res.Full {
		t.Fatal("the relabel needed a full sync; a partial one must carry it")
	}
	if got := realServers(t, fk, webVS); len(got) != 1 || got[ep2] != 1 {
		t.Fatalf("web real servers after its slice moved to api: %v, want only %s", got, ep2)
	}
	if got := realServers(t, fk, apiVS); len(got) != 1 || got[ep1] != 1 {
		t.Fatalf("api real servers after the slice moved in: %v, want only %s", got, ep1)
	}

	unlabelled := relabelled.DeepCopy()
	delete(unlabelled.Labels, discovery.LabelServiceName)
	handler.OnUpdate(relabelled, unlabelled)
	mustSync(t, p)
	if got := realServers(t, fk, apiVS); len(got) != 0 {
		t.Fatalf("api real servers after the slice lost its label: %v, want none", got)
	}
}

// BenchmarkTrackerHeldMemory reports what the tracker holds for 10,000
// Services of one EndpointSlice of 10 endpoints each, beyond the objects
// themselves: the compact slices the informer's cache holds, which it
// shares.
func BenchmarkTrackerHeldMemory(b *testing.B) {
	const n, perSlice = 10000, 10
	objs := make([]*ipvsproxy.EndpointSlice, n)
	for i := range objs {
		svc := servicetest.Service(fmt.Sprintf("svc-%d", i), "10.96.0.1")
		eps := make([]string, perSlice)
		for j := range eps {
			eps[j] = fmt.Sprintf("10.244.%d.%d@node%d", i%250, j, j)
		}
		objs[i] = ipvsproxy.CompactEndpointSlice(servicetest.Slice(svc, fmt.Sprintf("svc-%d-abcde", i), 8080, eps...))
	}
	var held float64
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		t := ipvsproxy.NewChangeTracker("node1", func() {})
		for _, s := range objs {
			t.SetSlice(s)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		held = float64(after.HeapAlloc) - float64(before.HeapAlloc)
		runtime.KeepAlive(t)
	}
	b.ReportMetric(held/n, "held-B/slice")
	b.ReportMetric(held/(n*perSlice), "held-B/endpoint")
}
