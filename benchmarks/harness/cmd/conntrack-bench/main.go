// Command conntrack-bench is issue 9's "conntrack clean-up with 1 M flows"
// beside kube-proxy v1.36.3: one process per side, each in a fresh network
// namespace, writes N UDP flows into its conntrack table over ctnetlink, 1%
// of them DNATed to an endpoint that is gone, then times R clean-ups of the
// stale flows (re-written between repeats, outside the timing) and checks
// that each deleted exactly the stale ones.
//
//	-side ours        ipvsproxy's reconciler call, conntrack.Table.DeleteFlowsMatching
//	-side kube-proxy  k8s.io/kubernetes/pkg/proxy/conntrack.CleanStaleEntries
//	-side both        the driver: -pairs pairs of processes, ours/theirs then
//	                  theirs/ours, each under `unshare --net`; prints a table
//
//	go run ./cmd/conntrack-bench -side both -flows 250000 -pairs 3 -repeats 3
//
// A side prints one result as JSON on stdout. A namespace holds at most the
// host's nf_conntrack_max flows (read-only inside it).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/harness/netns"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	"github.com/ipvsproxy/ipvsproxy/conntrack"
	ct "github.com/ti-mo/conntrack"
	"k8s.io/klog/v2"
	kpconntrack "k8s.io/kubernetes/pkg/proxy/conntrack"
)

const (
	sideOurs      = "ours"
	sideKubeProxy = "kube-proxy"
)

// result is one side's process.
type result struct {
	Side    string `json:"side"`
	Flows   int    `json:"flows"`
	Stale   int    `json:"stale"`
	Repeats int    `json:"repeats"`
	// Millis is each clean-up's wall time; P50 and P99 are over them.
	Millis []float64 `json:"millis"`
	P50    float64   `json:"p50_ms"`
	P99    float64   `json:"p99_ms"`
	// Deleted is what each clean-up reported deleting (all checked
	// against the table).
	Deleted []int `json:"deleted"`
	// AllocMB is each clean-up's runtime.MemStats.TotalAlloc growth.
	AllocMB []float64 `json:"alloc_mb"`
	// PeakRSSMB is getrusage's ru_maxrss at the end; RSSBeforeMB the same
	// before the first clean-up (after writing the flows).
	PeakRSSMB   float64 `json:"peak_rss_mb"`
	RSSBeforeMB float64 `json:"rss_before_mb"`
	InjectSecs  float64 `json:"inject_s"`
}

func main() {
	side := flag.String("side", "both", "ours, kube-proxy, or both (the driver)")
	flows := flag.Int("flows", 250_000, "UDP flows in the table")
	repeats := flag.Int("repeats", 3, "timed clean-ups per process")
	pairs := flag.Int("pairs", 1, "with -side both: ours/theirs process pairs")
	out := flag.String("json", "", "with -side both: also write every result to this file")
	flag.Parse()
	klog.SetLogger(logr.Discard())
	if *flows < 100 || *flows > maxFlows || *repeats < 1 {
		fail(fmt.Errorf("want -flows in [100, %d] and -repeats >= 1", maxFlows))
	}
	switch *side {
	case sideOurs, sideKubeProxy:
		fail(netns.Prepare(shape.NodeIP, ""))
		res, err := runSide(*side, *flows, *repeats, os.Stderr)
		fail(err)
		fail(json.NewEncoder(os.Stdout).Encode(res))
	case "both":
		exe, err := os.Executable()
		fail(err)
		var all []result
		for i := 0; i < *pairs; i++ {
			order := []string{sideOurs, sideKubeProxy}
			if i%2 == 1 {
				order = []string{sideKubeProxy, sideOurs}
			}
			for _, s := range order {
				r, err := runProcess(exe, []string{"-side", s, "-flows", strconv.Itoa(*flows), "-repeats", strconv.Itoa(*repeats)})
				fail(err)
				all = append(all, r)
			}
		}
		if *out != "" {
			b, err := json.MarshalIndent(all, "", "  ")
			fail(err)
			fail(os.WriteFile(*out, append(b, '\n'), 0o644))
		}
		fmt.Print(markdown(all))
	default:
		fail(fmt.Errorf("unknown -side %q", *side))
	}
}

// runProcess runs one side in a fresh network namespace, as cmd/bench's
// runOne does.
func runProcess(exe string, args []string) (result, error) {
	var r result
	cmd := exec.Command("unshare", append([]string{"--net", "--", exe}, args...)...)
	cmd.Env = append(os.Environ(), "IPVSPROXY_BENCH_NETNS=private")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return r, fmt.Errorf("conntrack-bench %v: %w", args, err)
	}
	return r, json.Unmarshal(stdout.Bytes(), &r)
}

// runSide is one side's process, in the caller's (private) network
// namespace: write the flows, then time the clean-ups.
func runSide(side string, n, repeats int, log io.Writer) (result, error) {
	res := result{Side: side, Flows: n, Stale: staleCount(n), Repeats: repeats}
	if max, err := os.ReadFile("/proc/sys/net/netfilter/nf_conntrack_max"); err == nil {
		if m, _ := strconv.Atoi(strings.TrimSpace(string(max))); m > 0 && n > m {
			return res, fmt.Errorf("%d flows do not fit: nf_conntrack_max is %d", n, m)
		}
	}
	tbl, err := conntrack.New()
	if err != nil {
		return res, err
	}
	defer tbl.Close()
	conn, err := ct.Dial(nil)
	if err != nil {
		return res, fmt.Errorf("open conntrack netlink socket: %w", err)
	}
	defer conn.Close()

	// The table must start empty: a fresh namespace.
	if left, err := count(tbl); err != nil || left != 0 {
		return res, fmt.Errorf("the namespace's table holds %d flows (%v): not a fresh network namespace", left, err)
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := inject(conn, flowAt(i)); err != nil {
			return res, fmt.Errorf("after %d flows: %w", i, err)
		}
	}
	res.InjectSecs = time.Since(start).Seconds()
	fmt.Fprintf(log, "%s: wrote %d flows in %.1fs\n", side, n, res.InjectSecs)

	var clean cleaner
	switch side {
	case sideOurs:
		svcs, slices := clusterObjects(true)
		clean = oursCleaner(tbl, svcs, slices)
	case sideKubeProxy:
		if clean, err = kubeProxyCleaner(kpconntrack.New()); err != nil {
			return res, err
		}
	default:
		return res, fmt.Errorf("unknown side %q", side)
	}

	res.RSSBeforeMB = maxRSS()
	for r := 0; r < repeats; r++ {
		if r > 0 {
			for i := 0; i < n; i++ {
				if isStale(i) {
					if err := inject(conn, flowAt(i)); err != nil {
						return res, fmt.Errorf("re-write stale flow: %w", err)
					}
				}
			}
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		t := time.Now()
		deleted, err := clean()
		d := time.Since(t)
		runtime.ReadMemStats(&after)
		if err != nil {
			return res, fmt.Errorf("%s clean-up %d: %w", side, r+1, err)
		}
		res.Millis = append(res.Millis, float64(d.Microseconds())/1000)
		res.Deleted = append(res.Deleted, deleted)
		res.AllocMB = append(res.AllocMB, float64(after.TotalAlloc-before.TotalAlloc)/(1<<20))
		t2 := newTally(n)
		if err := walk(tbl, t2.add); err != nil {
			return res, err
		}
		if err := t2.check(deleted); err != nil {
			return res, fmt.Errorf("%s clean-up %d did not delete exactly the stale flows: %w", side, r+1, err)
		}
		fmt.Fprintf(log, "%s: clean-up %d deleted %d of %d flows in %.1f ms\n", side, r+1, deleted, n, res.Millis[r])
	}
	res.P50, res.P99 = percentile(res.Millis, 50), percentile(res.Millis, 99)
	res.PeakRSSMB = maxRSS()
	return res, nil
}

// inject writes flow into the namespace's table as `conntrack -I` does
// (conntrack/stream_test.go's inject): both tuples as given, hours to live.
func inject(conn *ct.Conn, flow conntrack.Flow) error {
	tuple := func(src, dst netip.AddrPort) ct.Tuple {
		return ct.Tuple{
			IP:    ct.IPTuple{SourceAddress: src.Addr(), DestinationAddress: dst.Addr()},
			Proto: ct.ProtoTuple{Protocol: flow.Protocol, SourcePort: src.Port(), DestinationPort: dst.Port()},
		}
	}
	err := conn.Create(ct.Flow{
		TupleOrig:  tuple(flow.OrigSrc, flow.OrigDst),
		TupleReply: tuple(flow.ReplySrc, flow.ReplyDst),
		Timeout:    3 * 3600,
	})
	if err != nil {
		return fmt.Errorf("write conntrack flow %s: %w", flow, err)
	}
	return nil
}

// walk hands every IPv4 flow of the table to fn, streamed (a predicate
// that deletes nothing), so checking holds no copy of the table.
func walk(tbl conntrack.Interface, fn func(conntrack.Flow)) error {
	_, err := tbl.DeleteFlowsMatching(4, 0, func(f conntrack.Flow) bool { fn(f); return false })
	if err != nil {
		return fmt.Errorf("read the table back: %w", err)
	}
	return nil
}

func count(tbl conntrack.Interface) (int, error) {
	n := 0
	err := walk(tbl, func(conntrack.Flow) { n++ })
	return n, err
}

func maxRSS() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Maxrss) / 1024 // KiB on Linux
}

// percentile is the nearest-rank p-th percentile of v.
func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	k := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(k, 0), len(s)-1)]
}

// markdown is the driver's table: each side over all its processes'
// repeats, the ratio of kube-proxy's p50 (and p99) to ours.
func markdown(all []result) string {
	type agg struct {
		millis, alloc []float64
		deleted       []int
		rss           float64
		procs, flows  int
	}
	sides := map[string]*agg{}
	for _, r := range all {
		a := sides[r.Side]
		if a == nil {
			a = &agg{}
			sides[r.Side] = a
		}
		a.millis = append(a.millis, r.Millis...)
		a.alloc = append(a.alloc, r.AllocMB...)
		a.deleted = append(a.deleted, r.Deleted...)
		a.rss = max(a.rss, r.PeakRSSMB)
		a.procs++
		a.flows = r.Flows
	}
	var b strings.Builder
	b.WriteString("| side | flows | processes × repeats | p50 ms | p99 ms | p50 ratio to ours | deleted per clean-up | peak RSS MB | allocated MB per clean-up |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	ours := sides[sideOurs]
	for _, name := range []string{sideOurs, sideKubeProxy} {
		a := sides[name]
		if a == nil {
			continue
		}
		p50, p99 := percentile(a.millis, 50), percentile(a.millis, 99)
		ratio := "1.00"
		if name != sideOurs && ours != nil && percentile(ours.millis, 50) > 0 {
			ratio = fmt.Sprintf("%.2f", p50/percentile(ours.millis, 50))
		}
		del := slices.Compact(slices.Sorted(slices.Values(a.deleted)))
		fmt.Fprintf(&b, "| %s | %d | %d × %d | %.1f | %.1f | %s | %v | %.0f | %.1f |\n", name, a.flows, a.procs, len(a.millis)/max(a.procs, 1),
			p50, p99, ratio, strings.Trim(fmt.Sprint(del), "[]"), a.rss, mean(a.alloc))
	}
	return b.String()
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func fail(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "conntrack-bench:", err)
		os.Exit(1)
	}
}
