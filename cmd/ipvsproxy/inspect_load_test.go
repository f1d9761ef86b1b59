package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/ours"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/healthcheck"
	"github.com/ipvsproxy/ipvsproxy/internal/inspect"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// probeTimeout is the DaemonSet's probes' timeoutSeconds (deploy/base), as
// long as the load balancers' health checks commonly wait.
const probeTimeout = 5 * time.Second

// inspectLoad is one run of hostile and ordinary clients against the
// daemon's metrics, inspect and health servers.
type inspectLoad struct {
	services    int
	duration    time.Duration
	slowReaders int
	// floodPerSecond new connections a second, held until shed.
	floodPerSecond int
	// requestsPerSecond GET and HEAD of the snapshot and GET /metrics,
	// from keep-alive clients that read every answer.
	requestsPerSecond int
	// syncEvery is how often an endpoint changes and the proxier syncs,
	// making a new snapshot generation.
	syncEvery time.Duration
}

// inspectLoadResult is what a run measured.
type inspectLoadResult struct {
	snapshotBytes       int
	baseHeap, peakHeap  uint64
	heapBound           uint64
	requests, refused   int64
	probes, probeFailed int64
	firstProbeFailure   string
	exceeded            bool
}

// daemonStatusServers starts what `ipvsproxy run` serves beside the
// proxier, with the daemon's own functions and flags: the metrics and
// inspect listeners (statusAndInspectServers) and /healthz
// (serveHealthAndMetrics). It returns the metrics and health addresses.
func daemonStatusServers(t testing.TB, ctx context.Context, p *proxier.Proxier, args ...string) (metricsAddr, healthAddr string) {
	t.Helper()
	metricsAddr, healthAddr = freeLoopbackAddr(t), freeLoopbackAddr(t)
	health := healthcheck.NewProxyHealth(30*time.Second, clock.RealClock{})
	health.Updated()
	errs := make(chan error, 4)
	runAs(t, func(c *cli.Context) error {
		status, err := statusAndInspectServers(c, prometheus.NewRegistry(), p, nil)
		if err != nil {
			return err
		}
		serveHealthAndMetrics(ctx, c, health, status, errs)
		return nil
	}, append([]string{"--metrics-bind-address=" + metricsAddr, "--healthz-bind-address=" + healthAddr, "--bind-address-hard-fail"}, args...)...)
	for _, addr := range []string{metricsAddr, healthAddr} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, err := http.Get("http://" + addr + "/healthz")
			if err == nil {
				resp.Body.Close()
				break
			}
			select {
			case err := <-errs:
				t.Fatal(err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("nothing answers on %s", addr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return metricsAddr, healthAddr
}

// runAs parses `ipvsproxy run args` and calls action with its context
// instead of running the daemon.
func runAs(t testing.TB, action func(*cli.Context) error, args ...string) {
	t.Helper()
	app := newApp()
	app.Writer, app.ErrWriter = &bytes.Buffer{}, &bytes.Buffer{}
	for _, cmd := range app.Commands {
		if cmd.Name == "run" {
			cmd.Action = action
		}
	}
	if err := app.Run(append([]string{"ipvsproxy", "run"}, args...)); err != nil {
		t.Fatal(err)
	}
}

func freeLoopbackAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// heapObjects is the bytes of heap objects, live and not yet collected:
// what the process's heap holds now.
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// run drives the load and measures the heap every 10 ms. It stops early,
// exceeded, when the heap passes the bound: an endpoint that encodes per
// request grows by an encoding (18 MB at 10,000 Services) per answer in
// flight, and the test must not take the machine with it.
func (l inspectLoad) run(t testing.TB) inspectLoadResult {
	klog.SetLogger(logr.Discard())
	// The daemon's collector setting (applyGCPercent): the heap grows to
	// 1.25 times what is live before a collection.
	defer debug.SetGCPercent(debug.SetGCPercent(defaultGCPercent))

	s := shape.Shape{Services: l.services, Endpoints: 10}
	k := ours.FakeKernel(netif.NewFake(owned.DummyInterface))
	p, err := proxier.New(ours.Config(s), shape.NodeName, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < s.Services; i++ {
		p.Tracker().SetCompactService(ipvsproxy.CompactService(s.Service(i)))
		for _, sl := range s.Slices(i, s.Endpoints, 0) {
			p.Tracker().SetSlice(ipvsproxy.CompactEndpointSlice(sl))
		}
	}
	if res := p.Sync(); res.Err() != nil {
		t.Fatal(res.Err())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	metricsAddr, healthAddr := daemonStatusServers(t, ctx, p)
	snapshotURL := "http://" + metricsAddr + inspect.SnapshotPath

	var res inspectLoadResult
	resp, err := http.Get(snapshotURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d %s", snapshotURL, resp.StatusCode, body)
	}
	res.snapshotBytes = len(body)
	body = nil
	runtime.GC()
	res.baseHeap = heapObjects()
	// What the design allows above the base: the Snapshot being encoded
	// (about as large as its JSON), the compressed encodings that answers
	// in flight hold (inspect.DefaultLimits.MaxInFlight of them, the
	// current one and the one being made; a quarter of the JSON each at
	// most, a tenth in fact), and 64 MiB for every connection's buffers and
	// goroutine, the clients' included; all times the collector's 1.25.
	// Encoding per request, the endpoint held a copy of the JSON per answer
	// in flight (two while it was made).
	allowed := uint64(res.snapshotBytes) + uint64(inspect.DefaultLimits.MaxInFlight+2)*uint64(res.snapshotBytes)/4 + 64<<20
	res.heapBound = res.baseHeap + allowed*5/4

	loadCtx, stopLoad := context.WithTimeout(ctx, l.duration)
	defer stopLoad()
	var wg sync.WaitGroup
	var peak atomic.Uint64
	var exceeded atomic.Bool
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			h := heapObjects()
			if h > peak.Load() {
				peak.Store(h)
			}
			if h > res.heapBound {
				exceeded.Store(true)
				stopLoad()
			}
			select {
			case <-loadCtx.Done():
				return
			case <-tick.C:
			}
		}
	})
	// Syncs go on: a new generation every syncEvery, each one's snapshot
	// encoded afresh.
	wg.Go(func() {
		for i := 0; loadCtx.Err() == nil; i++ {
			for _, sl := range s.Slices(i%s.Services, s.Endpoints+i%2, 0) {
				p.Tracker().SetSlice(ipvsproxy.CompactEndpointSlice(sl))
			}
			p.Sync()
			sleepCtx(loadCtx, l.syncEvery)
		}
	})
	for range l.slowReaders {
		wg.Go(func() { slowSnapshotReader(loadCtx, metricsAddr) })
	}
	wg.Go(func() { floodNewConnections(loadCtx, metricsAddr, l.floodPerSecond) })
	var requests, refused atomic.Int64
	wg.Go(func() { steadyRequests(loadCtx, metricsAddr, l.requestsPerSecond, &requests, &refused) })
	var probes, failed atomic.Int64
	var firstFailure atomic.Value
	for _, url := range []string{"http://" + healthAddr + "/healthz", "http://" + metricsAddr + "/healthz"} {
		wg.Go(func() {
			client := &http.Client{Timeout: probeTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
			for loadCtx.Err() == nil {
				probes.Add(1)
				resp, err := client.Get(url)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil && loadCtx.Err() == nil {
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("%s: %v", url, err))
				}
				sleepCtx(loadCtx, 100*time.Millisecond)
			}
		})
	}
	wg.Wait()
	res.peakHeap, res.exceeded = peak.Load(), exceeded.Load()
	res.requests, res.refused = requests.Load(), refused.Load()
	res.probes, res.probeFailed = probes.Load(), failed.Load()
	if f := firstFailure.Load(); f != nil {
		res.firstProbeFailure = f.(string)
	}
	return res
}

// paced yields 0, 1, 2, ... perSecond times a second on average until ctx
// ends: a loop that was not scheduled for a while catches up, so the rate
// holds on a busy machine where a ticker's ticks would be dropped.
func paced(ctx context.Context, perSecond int) iter.Seq[int] {
	return func(yield func(int) bool) {
		start := time.Now()
		for i := 0; ctx.Err() == nil; {
			due := int(time.Since(start).Seconds() * float64(perSecond))
			for ; i < due; i++ {
				if !yield(i) || ctx.Err() != nil {
					return
				}
			}
			sleepCtx(ctx, time.Millisecond)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// slowSnapshotReader asks for the snapshot again and again on one
// connection from 127.0.0.3 with a 2 KiB receive buffer and takes 4 KiB of
// the answer a second; when the server cuts it (write deadline, shedding)
// it connects again.
func slowSnapshotReader(ctx context.Context, addr string) {
	d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 3)}, Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
	}}
	buf := make([]byte, 4096)
	for ctx.Err() == nil {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		stop := context.AfterFunc(ctx, func() { c.Close() })
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", inspect.SnapshotPath)
		for ctx.Err() == nil {
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(buf); err != nil {
				break
			}
			sleepCtx(ctx, time.Second)
		}
		stop()
		c.Close()
	}
}

// floodNewConnections opens perSecond connections a second from 127.0.0.2,
// each sending half a header, and keeps the last 256 open.
func floodNewConnections(ctx context.Context, addr string, perSecond int) {
	if perSecond <= 0 {
		return
	}
	d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	var kept []net.Conn
	defer func() {
		for _, c := range kept {
			c.Close()
		}
	}()
	for range paced(ctx, perSecond) {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			continue
		}
		c.SetWriteDeadline(time.Now().Add(time.Second))
		c.Write([]byte("GET /metrics HTTP/1.1\r\nHost: x\r\n"))
		if kept = append(kept, c); len(kept) > 256 {
			kept[0].Close()
			kept = kept[1:]
		}
	}
}

// steadyRequests sends perSecond requests a second from 127.0.0.4 without
// waiting for the answers (at most 256 outstanding), in turn a GET of the snapshot, a
// HEAD of it and a GET of /metrics, each read whole; refused counts the
// 503s.
func steadyRequests(ctx context.Context, addr string, perSecond int, requests, refused *atomic.Int64) {
	const outstanding = 256
	slots := make(chan struct{}, outstanding)
	var wg sync.WaitGroup
	defer wg.Wait()
	transport := &http.Transport{MaxIdleConnsPerHost: outstanding, DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 4)}}).DialContext}
	defer transport.CloseIdleConnections()
	client := &http.Client{Timeout: 10 * time.Second, Transport: transport}
	for i := range paced(ctx, perSecond) {
		select {
		case slots <- struct{}{}:
		default:
			continue // as many outstanding as the client keeps
		}
		method, path := http.MethodGet, inspect.SnapshotPath
		switch i % 3 {
		case 1:
			method = http.MethodHead
		case 2:
			path = "/metrics"
		}
		wg.Go(func() {
			defer func() { <-slots }()
			req, _ := http.NewRequestWithContext(ctx, method, "http://"+addr+path, nil)
			resp, err := client.Do(req)
			if err != nil {
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			requests.Add(1)
			if resp.StatusCode == http.StatusServiceUnavailable {
				refused.Add(1)
			}
		})
	}
}

func (r inspectLoadResult) check(t testing.TB, l inspectLoad) {
	t.Helper()
	mib := func(b uint64) float64 { return float64(b) / (1 << 20) }
	t.Logf("%d Services, %v: snapshot %.1f MiB; heap %.1f MiB before the load, peak %.1f MiB (bound %.1f); %d requests (%d refused busy), %d probes",
		l.services, l.duration, mib(uint64(r.snapshotBytes)), mib(r.baseHeap), mib(r.peakHeap), mib(r.heapBound), r.requests, r.refused, r.probes)
	if r.exceeded {
		t.Errorf("the heap reached %.1f MiB under %d slow readers, %d new connections/s and %d requests/s, beyond its bound of %.1f MiB (%.1f MiB before the load, snapshot %.1f MiB); the load was stopped",
			mib(r.peakHeap), l.slowReaders, l.floodPerSecond, l.requestsPerSecond, mib(r.heapBound), mib(r.baseHeap), mib(uint64(r.snapshotBytes)))
	}
	if r.probeFailed > 0 {
		t.Errorf("%d of %d /healthz probes (the health port and the metrics port) failed or took over %v; the first: %s", r.probeFailed, r.probes, probeTimeout, r.firstProbeFailure)
	}
	if r.requests == 0 || r.probes == 0 {
		t.Errorf("the load did not run: %d requests, %d probes", r.requests, r.probes)
	}
}

// The inspect endpoint costs bounded memory whatever its clients do, and
// /healthz answers throughout: slow readers of the snapshot, a flood of
// new connections and about 1,000 requests a second against the daemon's
// own servers, with syncs making a new snapshot every second (the
// daemon's --ipvs-min-sync-period). The load comes from 127.0.0.2-4 and
// the probes from 127.0.0.1, as pods' and the kubelet's or a load
// balancer's addresses differ: a full server closes a connection of the
// address holding the most (healthcheck's connectionShedder). The long
// form is BenchmarkInspectEndpointUnderHostileClients (make
// bench-inspect-load: 10,000 Services for a minute).
func TestInspectEndpointMemoryBoundedUnderHostileClients(t *testing.T) {
	if testing.Short() {
		t.Skip("opens thousands of connections")
	}
	l := inspectLoad{services: 3000, duration: 4 * time.Second, slowReaders: 64, floodPerSecond: 1000, requestsPerSecond: 1000, syncEvery: time.Second}
	l.run(t).check(t, l)
}

// BenchmarkInspectEndpointUnderHostileClients is the long form: 10,000
// Services (a snapshot of about 10 MB), a minute of load. Reported: the
// snapshot's size, the heap's peak over its level before the load, and
// the failed probes (0 or the benchmark fails).
func BenchmarkInspectEndpointUnderHostileClients(b *testing.B) {
	l := inspectLoad{services: 10000, duration: time.Minute, slowReaders: 256, floodPerSecond: 2000, requestsPerSecond: 1000, syncEvery: time.Second}
	for i := 0; i < b.N; i++ {
		r := l.run(b)
		r.check(b, l)
		b.ReportMetric(float64(r.snapshotBytes)/(1<<20), "snapshot-MiB")
		b.ReportMetric(float64(r.peakHeap-min(r.peakHeap, r.baseHeap))/(1<<20), "peak-over-base-MiB")
		b.ReportMetric(float64(r.requests)/l.duration.Seconds(), "requests/s")
		b.ReportMetric(float64(r.probeFailed), "failed-probes")
	}
}
