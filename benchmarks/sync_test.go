// Tier 1 of the benchmarks: the proxier's sync on the kernel fakes, in
// process, through the same Sync the daemon runs, on the shapes of
// benchmarks/shape. `make bench` runs them; the harness (benchmarks/harness)
// runs the same operations beside kube-proxy's proxier and reports both.
package benchmarks

import (
	"fmt"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/ours"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"k8s.io/klog/v2"
)

var sizes = []int{100, 1000, 10000}

func synced(b *testing.B, s shape.Shape) (*proxier.Proxier, adapters.Kernel) {
	b.Helper()
	k := ours.FakeKernel(netif.NewFake(owned.DummyInterface))
	p, err := proxier.New(ours.Config(s), shape.NodeName, k, nil)
	if err != nil {
		b.Fatal(err)
	}
	load(p, s)
	if res := p.Sync(); res.Err() != nil {
		b.Fatal(res.Err())
	}
	return p, k
}

func load(p *proxier.Proxier, s shape.Shape) {
	for _, o := range shapeObjects(s) {
		o.apply(p.Tracker())
	}
}

// BenchmarkColdSync: start-up of a node in a cluster of N Services.
func BenchmarkColdSync(b *testing.B) {
	klog.SetLogger(discardLogger())
	for _, n := range sizes {
		s := shape.Shape{Services: n, Endpoints: 10}
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				p, err := proxier.New(ours.Config(s), shape.NodeName, ours.FakeKernel(netif.NewFake(owned.DummyInterface)), nil)
				if err != nil {
					b.Fatal(err)
				}
				load(p, s)
				b.StartTimer()
				if res := p.Sync(); res.Err() != nil {
					b.Fatal(res.Err())
				}
			}
		})
	}
}

// BenchmarkEndpointChange: one endpoint added or removed in a cluster of N
// Services; the cost should not grow with N.
func BenchmarkEndpointChange(b *testing.B) {
	klog.SetLogger(discardLogger())
	for _, n := range sizes {
		s := shape.Shape{Services: n, Endpoints: 10}
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			p, _ := synced(b, s)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, sl := range s.Slices(n/2, s.Endpoints+i%2, 0) {
					p.Tracker().SetEndpointSlice(sl)
				}
				if res := p.Sync(); res.Err() != nil || res.Full {
					b.Fatalf("full=%v err=%v", res.Full, res.Err())
				}
			}
		})
	}
}

// BenchmarkNoopSync: a partial sync with nothing pending.
func BenchmarkNoopSync(b *testing.B) {
	klog.SetLogger(discardLogger())
	for _, n := range sizes {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			p, _ := synced(b, shape.Shape{Services: n, Endpoints: 10})
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if res := p.Sync(); res.Err() != nil || res.Writes != 0 {
					b.Fatalf("writes=%d err=%v", res.Writes, res.Err())
				}
			}
		})
	}
}

// BenchmarkFullResync: the periodic full sync of an unchanged cluster,
// which reads the kernel back and writes nothing.
func BenchmarkFullResync(b *testing.B) {
	klog.SetLogger(discardLogger())
	for _, n := range sizes {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			p, _ := synced(b, shape.Shape{Services: n, Endpoints: 10})
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p.RequestFullSync()
				if res := p.Sync(); res.Err() != nil || res.Writes != 0 || !res.Full {
					b.Fatalf("full=%v writes=%d err=%v", res.Full, res.Writes, res.Err())
				}
			}
		})
	}
}

// BenchmarkShareResync: a period between two full ones with
// --ipvs-resync-shares=10 (the full tenth period is synced untimed).
func BenchmarkShareResync(b *testing.B) {
	klog.SetLogger(discardLogger())
	for _, n := range sizes {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			p, _ := synced(b, shape.Shape{Services: n, Endpoints: 10})
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if p.PeriodElapsed() {
					b.StopTimer()
					p.Sync()
					p.PeriodElapsed()
					b.StartTimer()
				}
				if res := p.Sync(); res.Err() != nil || res.Writes != 0 || res.Full || res.ResyncedVirtualServers == 0 {
					b.Fatalf("full=%v writes=%d re-read=%d err=%v", res.Full, res.Writes, res.ResyncedVirtualServers, res.Err())
				}
			}
		})
	}
}
