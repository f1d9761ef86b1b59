package benchmarks

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/ours"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/ipvsproxy/ipvsproxy/netif"
	"k8s.io/klog/v2"
)

// BenchmarkFullSyncLiveHeap reports the heap a proxier keeps live after the
// full sync of N Services (live-heap-MiB, after a GC): the proxier's
// desired state and the fakes' copy of the kernel, the Services and
// EndpointSlices as the tracker holds them. The DaemonSet's memory limit is
// sized from it (deploy/base/daemonset.yaml).
func BenchmarkFullSyncLiveHeap(b *testing.B) {
	klog.SetLogger(discardLogger())
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			var live float64
			for i := 0; i < b.N; i++ {
				runtime.GC()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				s := shape.Shape{Services: n, Endpoints: 10}
				p, err := ipvsproxy.New(ours.Config(s), shape.NodeName, ours.FakeKernel(netif.NewFake(ipvsproxy.DummyInterface)), nil)
				if err != nil {
					b.Fatal(err)
				}
				load(p, s)
				if res := p.Sync(); res.Err() != nil {
					b.Fatal(res.Err())
				}
				runtime.GC()
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				live = float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)
				runtime.KeepAlive(p)
			}
			b.ReportMetric(live, "live-heap-MiB")
		})
	}
}
