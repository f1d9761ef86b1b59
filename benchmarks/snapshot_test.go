package benchmarks

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/healthcheck"
	"github.com/ipvsproxy/ipvsproxy/internal/inspect"
	"k8s.io/klog/v2"
)

// BenchmarkEndpointChangeUnderInspectClients: one endpoint changed per sync,
// a sync every 100 ms (ten times the daemon's --ipvs-min-sync-period), in a
// cluster of 10,000 Services while HTTP clients GET the inspect snapshot
// without pause over loopback, each reading every answer whole, from the
// endpoint as the daemon serves it (inspect.Handler with its default
// limits, on healthcheck.Serve). Reported: the syncs' p50 and p99, and per
// sync the snapshots answered (200) and the GETs refused while 4 answers
// were in flight (503). Every sync is a new generation, so the endpoint
// encodes again after each: the most CPU the clients can take from the
// syncs. Run it with -benchtime 100x or more: a snapshot of 10,000
// Services takes a second or two to make and encode.
func BenchmarkEndpointChangeUnderInspectClients(b *testing.B) {
	klog.SetLogger(discardLogger())
	n := 10000
	s := shape.Shape{Services: n, Endpoints: 10}
	for _, clients := range []int{0, 50} {
		b.Run(fmt.Sprintf("services=%d/clients=%d", n, clients), func(b *testing.B) {
			p, _ := synced(b, s)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			handler := inspect.Handler(inspect.Source{Generation: p.SnapshotGeneration, Snapshot: p.Snapshot}, inspect.DefaultLimits)
			go func() { served <- healthcheck.Serve(ctx, ln, handler) }()
			url := "http://" + ln.Addr().String() + inspect.SnapshotPath

			var wg sync.WaitGroup
			var answered, refused, failed atomic.Int64
			transport := &http.Transport{MaxIdleConnsPerHost: clients}
			client := &http.Client{Transport: transport, Timeout: time.Minute}
			for range clients {
				wg.Go(func() {
					for ctx.Err() == nil {
						req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
						resp, err := client.Do(req)
						if err != nil {
							if ctx.Err() == nil {
								failed.Add(1)
								time.Sleep(10 * time.Millisecond)
							}
							continue
						}
						_, err = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						switch {
						case ctx.Err() != nil: // cut by the end of the run
						case err != nil:
							failed.Add(1)
						case resp.StatusCode == http.StatusOK:
							answered.Add(1)
						case resp.StatusCode == http.StatusServiceUnavailable:
							refused.Add(1)
						default:
							failed.Add(1)
						}
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
				time.Sleep(100 * time.Millisecond)
			}
			b.StopTimer()
			// A run shorter than one encoding (go test's first, with N 1)
			// waits for an answer: the clients are proven to be served.
			for deadline := time.Now().Add(2 * time.Minute); clients > 0 && answered.Load() == 0 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			wg.Wait()
			transport.CloseIdleConnections()
			if err := <-served; err != nil {
				b.Fatal(err)
			}
			if f := failed.Load(); f > 0 {
				b.Fatalf("%d GETs failed (neither an answer nor a 503)", f)
			}
			if clients > 0 && answered.Load() == 0 {
				b.Fatalf("%d clients were never answered", clients)
			}
			slices.Sort(durations)
			b.ReportMetric(float64(durations[len(durations)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(durations[len(durations)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(answered.Load())/float64(b.N), "answered/sync")
			b.ReportMetric(float64(refused.Load())/float64(b.N), "refused/sync")
		})
	}
}
