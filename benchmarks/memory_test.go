package benchmarks

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/ours"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/ipvsproxy/ipvsproxy/netif"
	"k8s.io/klog/v2"
)

// BenchmarkFullSyncLiveHeap reports the heap a proxier keeps live after the
// full sync of N Services (live-heap-MiB, after a GC): the proxier's
// desired state and the fakes' copy of the kernel, the Services and
// EndpointSlices as the tracker holds them. The DaemonSet's memory limit is
// sized from it (deploy/base/daemonset.yaml). It also splits that heap:
// inputs-MiB, the Services and EndpointSlices themselves (an informer's
// cache holds them on a node); fakes-MiB, the Fakes standing for the
// kernel (kernel memory on a node, not the daemon's); proxier-MiB, what
// the proxier itself keeps (the tracker, the desired state, the view, the
// status of every object), measured by dropping it and keeping the rest.
func BenchmarkFullSyncLiveHeap(b *testing.B) {
	klog.SetLogger(discardLogger())
	for _, n := range []int{1000, 5000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			var live, inputs, fakes, own float64
			for i := 0; i < b.N; i++ {
				heap := func() uint64 {
					runtime.GC()
					var m runtime.MemStats
					runtime.ReadMemStats(&m)
					return m.HeapAlloc
				}
				base := heap()
				s := shape.Shape{Services: n, Endpoints: 10}
				objects := shapeObjects(s)
				withInputs := heap()
				k := ours.FakeKernel(netif.NewFake(owned.DummyInterface))
				p, err := proxier.New(ours.Config(s), shape.NodeName, k, nil)
				if err != nil {
					b.Fatal(err)
				}
				for _, o := range objects {
					o.apply(p.Tracker())
				}
				if res := p.Sync(); res.Err() != nil {
					b.Fatal(res.Err())
				}
				synced := heap()
				runtime.KeepAlive(p)
				p = nil
				withoutProxier := heap()
				runtime.KeepAlive(k)
				runtime.KeepAlive(objects)
				mib := func(a, b uint64) float64 { return (float64(a) - float64(b)) / (1 << 20) }
				live, inputs = mib(synced, base), mib(withInputs, base)
				own, fakes = mib(synced, withoutProxier), mib(withoutProxier, withInputs)
			}
			b.ReportMetric(live, "live-heap-MiB")
			b.ReportMetric(inputs, "inputs-MiB")
			b.ReportMetric(fakes, "fakes-MiB")
			b.ReportMetric(own, "proxier-MiB")
		})
	}
}

// shapeObject is one Service or EndpointSlice of a shape, compact as the
// daemon's informer cache holds it.
type shapeObject struct {
	svc   *ipvsproxy.Service
	slice *ipvsproxy.EndpointSlice
}

func (o shapeObject) apply(t *ipvsproxy.ChangeTracker) {
	if o.svc != nil {
		t.SetCompactService(o.svc)
	} else {
		t.SetSlice(o.slice)
	}
}

// shapeObjects are the objects of s, as load hands them to a tracker.
func shapeObjects(s shape.Shape) []shapeObject {
	var out []shapeObject
	for i := 0; i < s.Services; i++ {
		out = append(out, shapeObject{svc: ipvsproxy.CompactService(s.Service(i))})
		for _, sl := range s.Slices(i, s.Endpoints, 0) {
			out = append(out, shapeObject{slice: ipvsproxy.CompactEndpointSlice(sl)})
		}
	}
	return out
}
