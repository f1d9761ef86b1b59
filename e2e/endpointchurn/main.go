// Command endpointchurn is the daemon tier's churn driver (e2e/vm/bench-daemon.sh
// --churn): run in a node's network namespace of the VM, it changes one endpoint of a
// random Service at a steady rate through the API (the slice stamped with
// endpoints.kubernetes.io/last-change-trigger-time, as the EndpointSlice controller
// stamps it), watches the node's IPVS table until each change is there, and reports each
// change's network programming latency (trigger time to the new real server in the
// kernel, raw), the proxy's own kubeproxy_network_programming_duration_seconds over the
// same window, and its re-checks (full syncs) meanwhile with their duration, and the
// proxy process's CPU time.
//
// The changes go on until at least -min-rechecks full syncs ended and -min-duration
// passed (or -max-duration), then it waits for the last changes to reach the kernel.
// Each change replaces the last endpoint of a Service's slice with a new address, so
// that the kernel loses one real server and gains another.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const triggerTimeAnnotation = "endpoints.kubernetes.io/last-change-trigger-time"

type options struct {
	kubeconfig, namespace, metricsURL, out string
	services, first                        int
	rate                                   float64
	minRechecks                            int
	minDuration, maxDuration               time.Duration
	seed                                   uint64
	pid                                    int
	sliceSuffix                            string
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of a user that may get Services and update EndpointSlices")
	flag.StringVar(&o.namespace, "namespace", "bench", "namespace of the Services svc-0 ... svc-(N-1)")
	flag.IntVar(&o.services, "services", 0, "N: the Services are svc-FIRST ... svc-(N-1)")
	flag.IntVar(&o.first, "first", 21, "the first Service to change (those below are the harness's own)")
	flag.StringVar(&o.sliceSuffix, "slice-suffix", "-bench", "each Service's slice is named after it with this suffix")
	flag.Float64Var(&o.rate, "rate", 5, "endpoint changes per second")
	flag.IntVar(&o.minRechecks, "min-rechecks", 3, "go on until the proxy ended at least this many full syncs")
	flag.DurationVar(&o.minDuration, "min-duration", 2*time.Minute, "and at least this long")
	flag.DurationVar(&o.maxDuration, "max-duration", 15*time.Minute, "but never longer")
	flag.StringVar(&o.metricsURL, "metrics", "http://127.0.0.1:10249/metrics", "the proxy's metrics")
	flag.IntVar(&o.pid, "pid", 0, "the proxy's process (its CPU time over the window); 0: none")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the Services' order and the new addresses")
	flag.StringVar(&o.out, "out", "", "file for the raw samples (TSV); the summary goes to stdout as JSON")
	flag.Parse()
	if o.services <= o.first || o.rate <= 0 || o.kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "endpointchurn: -kubeconfig, -services above -first and a positive -rate are required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "endpointchurn:", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(sum); err != nil {
		os.Exit(1)
	}
}

// change is one endpoint change and what became of it.
type change struct {
	service         string
	vs              ipvs.VirtualServerKey
	added, removed  netip.Addr
	trigger, acked  time.Time
	seen            time.Time
	slice           *discoveryv1.EndpointSlice
	writeErr        error
	writeRoundTrips int
}

func run(ctx context.Context, o options) (*summary, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = -1, 0
	// Protobuf, as the proxies read: the driver shares the node's one CPU.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	handle, err := ipvs.New()
	if err != nil {
		return nil, fmt.Errorf("open the node's IPVS table: %w", err)
	}
	defer handle.Close()

	count := int(o.rate*o.maxDuration.Seconds()) + 1
	count = min(count, o.services-o.first)
	rng := rand.New(rand.NewPCG(o.seed, o.seed^0x9e3779b97f4a7c15))
	picks := rng.Perm(o.services - o.first)[:count]
	fmt.Fprintf(os.Stderr, "endpointchurn: reading %d Services and their slices\n", count)
	changes, err := prepare(ctx, cs, o, picks)
	if err != nil {
		return nil, err
	}

	before, err := scrape(o.metricsURL)
	if err != nil {
		return nil, fmt.Errorf("read the proxy's metrics before: %w", err)
	}
	cpu0 := cpuSeconds(o.pid)
	start := time.Now()
	fmt.Fprintf(os.Stderr, "endpointchurn: %.1f changes/s from %s\n", o.rate, start.UTC().Format(time.RFC3339))

	var mu sync.Mutex
	written := 0 // changes handed to a writer, in order
	var writers sync.WaitGroup
	watchDone := make(chan struct{})
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	go func() {
		defer close(watchDone)
		watchKernel(watchCtx, handle, changes, &mu, &written)
	}()
	ticker := time.NewTicker(time.Duration(float64(time.Second) / o.rate))
	defer ticker.Stop()
	rechecks := 0
	lastScrape := start
writing:
	for i := range changes {
		select {
		case <-ctx.Done():
			break writing
		case <-ticker.C:
		}
		c := &changes[i]
		writers.Add(1)
		go func() {
			defer writers.Done()
			write(ctx, cs, o, c, &mu)
		}()
		mu.Lock()
		written = i + 1
		mu.Unlock()
		elapsed := time.Since(start)
		if time.Since(lastScrape) >= 5*time.Second {
			lastScrape = time.Now()
			if now, err := scrape(o.metricsURL); err == nil {
				rechecks = int(now.value("ipvsproxy_sync_full_total") - before.value("ipvsproxy_sync_full_total"))
				if rechecks == 0 && now.value("ipvsproxy_sync_full_total") == 0 {
					// Not ipvsproxy: every sync of kube-proxy's IPVS mode is full.
					rechecks = int(now.value("kubeproxy_sync_proxy_rules_duration_seconds_count") - before.value("kubeproxy_sync_proxy_rules_duration_seconds_count"))
				}
			}
		}
		if elapsed >= o.maxDuration || elapsed >= o.minDuration && rechecks >= o.minRechecks {
			break
		}
	}
	ended := time.Now()
	writers.Wait()
	// The last changes reach the kernel, or a minute passes.
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for waitCtx.Err() == nil && outstanding(changes, &mu, written) > 0 {
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	n := written
	mu.Unlock()
	// Let the proxy's histogram take the sync that wrote the last ones.
	time.Sleep(2 * time.Second)
	after, err := scrape(o.metricsURL)
	if err != nil {
		return nil, fmt.Errorf("read the proxy's metrics after: %w", err)
	}
	cpu1 := cpuSeconds(o.pid)
	stopWatching()
	<-watchDone
	if o.out != "" {
		if err := writeSamples(o.out, changes[:n]); err != nil {
			return nil, err
		}
	}
	return summarize(o, changes[:n], start, ended, before, after, cpu0, cpu1), nil
}

// prepare reads each picked Service's cluster IP and slice, and plans its change.
func prepare(ctx context.Context, cs kubernetes.Interface, o options, picks []int) ([]change, error) {
	out := make([]change, len(picks))
	var wg sync.WaitGroup
	errs := make(chan error, len(picks))
	next := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				name := fmt.Sprintf("svc-%d", o.first+picks[i])
				svc, err := cs.CoreV1().Services(o.namespace).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					errs <- fmt.Errorf("get service %s/%s: %w", o.namespace, name, err)
					continue
				}
				ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
				if err != nil {
					errs <- fmt.Errorf("service %s/%s has no cluster IP", o.namespace, name)
					continue
				}
				slice, err := cs.DiscoveryV1().EndpointSlices(o.namespace).Get(ctx, name+o.sliceSuffix, metav1.GetOptions{})
				if err != nil || len(slice.Endpoints) == 0 || len(slice.Endpoints[len(slice.Endpoints)-1].Addresses) == 0 {
					errs <- fmt.Errorf("endpointslice of %s/%s: %v", o.namespace, name, err)
					continue
				}
				removed, err := netip.ParseAddr(slice.Endpoints[len(slice.Endpoints)-1].Addresses[0])
				if err != nil {
					errs <- fmt.Errorf("endpointslice of %s/%s: %w", o.namespace, name, err)
					continue
				}
				out[i] = change{service: name, vs: ipvs.VirtualServerKey{Address: ip, Port: 80, Protocol: ipvs.TCP},
					removed: removed, added: newAddress(i, o.seed, slice), slice: slice}
			}
		}()
	}
	for i := range picks {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return out, nil
}

// newAddress is the i-th change's new endpoint in 10.245.0.0/16 (outside the bulk
// Services' 10.244.0.0/16), where each seed starts elsewhere, one the slice does not
// hold: a Service a run with another seed changed before gets another address.
func newAddress(i int, seed uint64, slice *discoveryv1.EndpointSlice) netip.Addr {
	for n := i + int(seed%64)*1021; ; n++ {
		a := netip.AddrFrom4([4]byte{10, 245, byte(n >> 8), byte(n)})
		if !slices.ContainsFunc(slice.Endpoints, func(e discoveryv1.Endpoint) bool { return slices.Contains(e.Addresses, a.String()) }) {
			return a
		}
	}
}

// write makes change c: the slice's last endpoint takes the new address, stamped with
// the trigger time, retried on a conflict (the slice read again).
func write(ctx context.Context, cs kubernetes.Interface, o options, c *change, mu *sync.Mutex) {
	slices := cs.DiscoveryV1().EndpointSlices(o.namespace)
	slice := c.slice.DeepCopy()
	for attempt := 1; ; attempt++ {
		last := &slice.Endpoints[len(slice.Endpoints)-1]
		last.Addresses = []string{c.added.String()}
		last.TargetRef = nil
		now := time.Now()
		if slice.Annotations == nil {
			slice.Annotations = map[string]string{}
		}
		slice.Annotations[triggerTimeAnnotation] = now.UTC().Format(time.RFC3339Nano)
		_, err := slices.Update(ctx, slice, metav1.UpdateOptions{})
		mu.Lock()
		c.trigger, c.acked, c.writeErr, c.writeRoundTrips = now, time.Now(), err, attempt
		mu.Unlock()
		if err == nil || attempt == 3 || ctx.Err() != nil {
			return
		}
		fresh, gerr := slices.Get(ctx, slice.Name, metav1.GetOptions{})
		if gerr != nil {
			return
		}
		slice = fresh
	}
}

// watchKernel polls the IPVS table for the oldest changes not yet seen, every 20 ms:
// the proxies program changes in the order they arrive (each sync writes all that
// are pending), so a few of the oldest are where the next ones appear.
func watchKernel(ctx context.Context, h ipvs.Interface, changes []change, mu *sync.Mutex, written *int) {
	const window = 8
	var room []ipvs.RealServer
	for ctx.Err() == nil {
		mu.Lock()
		n := *written
		mu.Unlock()
		polled := 0
		for i := 0; i < n && polled < window; i++ {
			mu.Lock()
			c := changes[i]
			mu.Unlock()
			if !c.seen.IsZero() || c.trigger.IsZero() || c.writeErr != nil {
				continue
			}
			polled++
			rss, err := h.ListedRealServers(c.vs, room)
			room = rss
			if err != nil {
				continue
			}
			if slices.ContainsFunc(rss, func(rs ipvs.RealServer) bool { return rs.Address == c.added }) {
				seen := time.Now()
				mu.Lock()
				changes[i].seen = seen
				mu.Unlock()
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func outstanding(changes []change, mu *sync.Mutex, n int) int {
	mu.Lock()
	defer mu.Unlock()
	left := 0
	for _, c := range changes[:n] {
		if c.seen.IsZero() && c.writeErr == nil {
			left++
		}
	}
	return left
}
