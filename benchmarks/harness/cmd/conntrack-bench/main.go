// Command conntrack-bench is the "conntrack clean-up with 1 M flows" benchmark
// beside kube-proxy v1.37.2: one process per side, each in a fresh network
// namespace, writes N UDP flows into its conntrack table over ctnetlink, 1%
// of them DNATed to an endpoint that has left its Services, then times R
// repeats of each side's clean-up of the stale flows (re-written between
// repeats, outside the timing) and checks that each deleted exactly the
// stale ones and left exactly the live ones.
//
//	-side ours        ipvsproxy's own Proxier (the daemon's sync path) on
//	                  fake IPVS, ipset, iptables, netif and sysctl and the
//	                  namespace's real conntrack table, two operations:
//	                  change    the partial Sync of the EndpointSlice change
//	                            that drops the endpoint (stale.go's filters,
//	                            Table.DeleteFlows)
//	                  periodic  a full Sync with the stale flows back: its
//	                            conntrack reconcile pass (kubernetes#112604,
//	                            Table.DeleteFlowsMatching)
//	-side kube-proxy  k8s.io/kubernetes/pkg/proxy/conntrack.CleanStaleEntries,
//	                  which kube-proxy runs for both cases
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
	Side    string     `json:"side"`
	Flows   int        `json:"flows"`
	Stale   int        `json:"stale"`
	Repeats int        `json:"repeats"`
	Ops     []opResult `json:"ops"`
	// PeakRSSMB is getrusage's ru_maxrss at the end; RSSBeforeMB the same
	// before the first clean-up (after writing the flows and, for ours,
	// the cold sync).
	PeakRSSMB   float64 `json:"peak_rss_mb"`
	RSSBeforeMB float64 `json:"rss_before_mb"`
	InjectSecs  float64 `json:"inject_s"`
}

// opResult is one operation's repeats in one process.
type opResult struct {
	Op string `json:"op"`
	// Millis is each run's wall time; P50 and P99 are over them.
	Millis []float64 `json:"millis"`
	P50    float64   `json:"p50_ms"`
	P99    float64   `json:"p99_ms"`
	// PassMillis is, for ours, the conntrack pass's own time within each
	// run (SyncResult.Conntrack[IPv4].Duration); empty for kube-proxy,
	// whose run is the pass.
	PassMillis []float64 `json:"pass_millis,omitempty"`
	// Deleted is what each run reported deleting (all checked against
	// the table).
	Deleted []int `json:"deleted"`
	// Filters and DistinctFilters are, for ours, what each run handed to
	// conntrack's DeleteFlows (see ran).
	Filters         []int `json:"filters,omitempty"`
	DistinctFilters []int `json:"distinct_filters,omitempty"`
	// AllocMB is each run's runtime.MemStats.TotalAlloc growth.
	AllocMB []float64 `json:"alloc_mb"`
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

	add := func(f conntrack.Flow) error { return inject(conn, f) }
	var ops []op
	switch side {
	case sideOurs:
		ops, err = oursOps(tbl, add, n)
	case sideKubeProxy:
		ops, err = kubeProxyOps(kpconntrack.New(), add, n)
	default:
		err = fmt.Errorf("unknown side %q", side)
	}
	if err != nil {
		return res, err
	}
	res.RSSBeforeMB = maxRSS()
	if res.Ops, err = runOps(side, ops, tbl, n, repeats, log); err != nil {
		return res, err
	}
	res.PeakRSSMB = maxRSS()
	return res, nil
}

// runOps runs repeats rounds of ops, in order, on tbl (holding flows
// 0..n-1): each prepared, timed, then the table checked to hold exactly
// the live flows while the run reported deleting exactly the stale ones.
func runOps(side string, ops []op, tbl conntrack.Interface, n, repeats int, log io.Writer) ([]opResult, error) {
	out := make([]opResult, len(ops))
	for r := 0; r < repeats; r++ {
		for j, o := range ops {
			res := &out[j]
			res.Op = o.name
			if err := o.prepare(r); err != nil {
				return out, fmt.Errorf("%s %s %d: prepare: %w", side, o.name, r+1, err)
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			t := time.Now()
			got, err := o.run()
			d := time.Since(t)
			deleted := got.Deleted
			runtime.ReadMemStats(&after)
			if err != nil {
				return out, fmt.Errorf("%s %s %d: %w", side, o.name, r+1, err)
			}
			res.Millis = append(res.Millis, millis(d))
			if side == sideOurs {
				res.PassMillis = append(res.PassMillis, millis(got.Pass))
				res.Filters = append(res.Filters, got.Filters)
				res.DistinctFilters = append(res.DistinctFilters, got.Distinct)
			}
			res.Deleted = append(res.Deleted, deleted)
			res.AllocMB = append(res.AllocMB, float64(after.TotalAlloc-before.TotalAlloc)/(1<<20))
			tl := newTally(n)
			if err := walk(tbl, tl.add); err != nil {
				return out, err
			}
			if err := tl.check(deleted); err != nil {
				return out, fmt.Errorf("%s %s %d did not delete exactly the stale flows: %w", side, o.name, r+1, err)
			}
			if o.check != nil {
				if err := o.check(); err != nil {
					return out, fmt.Errorf("%s %s %d: %w", side, o.name, r+1, err)
				}
			}
			fmt.Fprintf(log, "%s %s %d: deleted %d of %d flows in %.1f ms", side, o.name, r+1, deleted, n, res.Millis[r])
			if side == sideOurs {
				fmt.Fprintf(log, " (conntrack pass %.1f ms, %d DeleteFlows filters, %d distinct)", millis(got.Pass), got.Filters, got.Distinct)
			}
			fmt.Fprintln(log)
		}
	}
	for j := range out {
		out[j].P50, out[j].P99 = percentile(out[j].Millis, 50), percentile(out[j].Millis, 99)
	}
	return out, nil
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

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

// markdown is the driver's table: each side's operations over all its
// processes' repeats; for each of ours, kube-proxy's p50 over its p50 (and
// over its conntrack pass's p50).
func markdown(all []result) string {
	type agg struct {
		side, op            string
		millis, pass, alloc []float64
		deleted, filters    []int
		rss                 float64
		procs, flows        int
	}
	var rows []*agg
	find := func(side, op string) *agg {
		for _, a := range rows {
			if a.side == side && a.op == op {
				return a
			}
		}
		return nil
	}
	for _, r := range all {
		for _, o := range r.Ops {
			a := find(r.Side, o.Op)
			if a == nil {
				a = &agg{side: r.Side, op: o.Op}
				rows = append(rows, a)
			}
			a.millis = append(a.millis, o.Millis...)
			a.pass = append(a.pass, o.PassMillis...)
			a.alloc = append(a.alloc, o.AllocMB...)
			a.deleted = append(a.deleted, o.Deleted...)
			for i := range o.Filters {
				a.filters = append(a.filters, o.Filters[i], o.DistinctFilters[i])
			}
			a.rss = max(a.rss, r.PeakRSSMB)
			a.procs++
			a.flows = r.Flows
		}
	}
	order := map[string]int{sideOurs: 0, sideKubeProxy: 1}
	slices.SortStableFunc(rows, func(a, b *agg) int { return order[a.side] - order[b.side] })
	theirs := find(sideKubeProxy, opCleanStale)
	ratio := func(v []float64) string {
		if theirs == nil || len(v) == 0 || percentile(v, 50) <= 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f", percentile(theirs.millis, 50)/percentile(v, 50))
	}
	var b strings.Builder
	b.WriteString("| side | operation | flows | processes × repeats | p50 ms | p99 ms | kube-proxy p50 ÷ p50 | conntrack pass p50 ms | kube-proxy p50 ÷ pass p50 | deleted per run | DeleteFlows filters (distinct) | peak RSS MB | allocated MB per run |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, a := range rows {
		pass := "–"
		if len(a.pass) > 0 {
			pass = fmt.Sprintf("%.1f", percentile(a.pass, 50))
		}
		r, rp := ratio(a.millis), ratio(a.pass)
		if a == theirs {
			r, rp = "1.00", "–"
		}
		del := slices.Compact(slices.Sorted(slices.Values(a.deleted)))
		// Each run's filter count, with its distinct ones, once per value.
		var fs []string
		for i := 0; i+1 < len(a.filters); i += 2 {
			if f := fmt.Sprintf("%d (%d)", a.filters[i], a.filters[i+1]); !slices.Contains(fs, f) {
				fs = append(fs, f)
			}
		}
		filters := "–"
		if len(fs) > 0 {
			filters = strings.Join(fs, ", ")
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d × %d | %.1f | %.1f | %s | %s | %s | %s | %s | %.0f | %.1f |\n", a.side, a.op, a.flows, a.procs, len(a.millis)/max(a.procs, 1),
			percentile(a.millis, 50), percentile(a.millis, 99), r, pass, rp, strings.Trim(fmt.Sprint(del), "[]"), filters, a.rss, mean(a.alloc))
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
