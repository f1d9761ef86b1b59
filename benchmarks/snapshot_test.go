package benchmarks

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	"k8s.io/klog/v2"
)

// BenchmarkEndpointChangeUnderSnapshotClients: one endpoint changed per sync
// in a cluster of 10,000 Services while 50 clients ask for the inspect
// snapshot without pause (the endpoint needs no credentials on the node).
// Reported: the syncs' p50 and p99 with clients=0 and clients=50; a snapshot
// is made at most once per sync, outside the sync lock but for a copy of
// pointers, so the p99 should not move with the clients.
func BenchmarkEndpointChangeUnderSnapshotClients(b *testing.B) {
	klog.SetLogger(discardLogger())
	n := 10000
	s := shape.Shape{Services: n, Endpoints: 10}
	for _, clients := range []int{0, 50} {
		b.Run(fmt.Sprintf("services=%d/clients=%d", n, clients), func(b *testing.B) {
			p, _ := synced(b, s)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var snapshots atomic.Int64
			for c := 0; c < clients; c++ {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						_ = p.Snapshot()
						snapshots.Add(1)
					}
				})
			}
			durations := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, sl := range s.Slices(n/2, s.Endpoints+i%2, 0) {
					p.Tracker().SetEndpointSlice(sl)
				}
				start := time.Now()
				if res := p.Sync(); res.Err() != nil || res.Full {
					b.Fatalf("full=%v err=%v", res.Full, res.Err())
				}
				durations = append(durations, time.Since(start))
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
			slices.Sort(durations)
			b.ReportMetric(float64(durations[len(durations)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(durations[len(durations)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(snapshots.Load())/float64(b.N), "snapshots/sync")
		})
	}
}
