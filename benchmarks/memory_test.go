package benchmarks

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/ours"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
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
				p, k := unsyncedProxier(b, s, objects)
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

// unsyncedProxier is a proxier of shape s on the fakes, its tracker holding
// objects, not synced yet; and its kernel.
func unsyncedProxier(b *testing.B, s shape.Shape, objects []shapeObject) (*proxier.Proxier, adapters.Kernel) {
	k := ours.FakeKernel(netif.NewFake(owned.DummyInterface))
	p, err := proxier.New(ours.Config(s), shape.NodeName, k, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, o := range objects {
		o.apply(p.Tracker())
	}
	return p, k
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

// BenchmarkColdSyncPeakLiveHeap reports how far the live heap rises above
// what stays live while the cold sync of N Services runs
// (peak-over-end-MiB): what the sync holds only for its duration. The heap
// target is the live heap times 1 + GOGC/100, so this transient, not the
// end state, sets the daemon's peak RSS after its first sync. The collector
// runs at GOGC=2 during the sync so that the live heap it measures at each
// cycle's end follows the true one to within 2%.
// IPVSPROXY_COLD_PEAK_SERVICES lists other sizes (make bench-cold-peak).
func BenchmarkColdSyncPeakLiveHeap(b *testing.B) {
	klog.SetLogger(discardLogger())
	sizes := []int{1000, 10000}
	if env := os.Getenv("IPVSPROXY_COLD_PEAK_SERVICES"); env != "" {
		sizes = nil
		for _, f := range strings.Split(env, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("IPVSPROXY_COLD_PEAK_SERVICES=%q: want sizes like 10000,50000", env)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			var over, end float64
			for i := 0; i < b.N; i++ {
				s := shape.Shape{Services: n, Endpoints: 10}
				objects := shapeObjects(s)
				p, _ := unsyncedProxier(b, s, objects)
				runtime.GC()
				before := liveHeap()
				peak := watchPeakLiveHeap()
				old := debug.SetGCPercent(2)
				res := p.Sync()
				debug.SetGCPercent(old)
				highest := peak()
				if res.Err() != nil {
					b.Fatal(res.Err())
				}
				runtime.GC()
				after := liveHeap()
				runtime.KeepAlive(p)
				runtime.KeepAlive(objects)
				over = (float64(highest) - float64(after)) / (1 << 20)
				end = (float64(after) - float64(before)) / (1 << 20)
			}
			b.ReportMetric(over, "peak-over-end-MiB")
			b.ReportMetric(end, "kept-by-the-sync-MiB")
		})
	}
}

// liveHeap is the live heap the last collection marked.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// watchPeakLiveHeap samples the live heap every millisecond until the
// returned function is called, which returns the highest sample.
func watchPeakLiveHeap() func() uint64 {
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		highest := liveHeap()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				done <- max(highest, liveHeap())
				return
			case <-t.C:
				highest = max(highest, liveHeap())
			}
		}
	}()
	return func() uint64 { close(stop); return <-done }
}
