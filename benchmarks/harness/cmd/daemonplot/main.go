// Command daemonplot draws the daemon tier's figures (e2e/vm/bench-daemon.sh's JSON lines, one
// object per side and size) against the number of Services, one line per side, on log scales,
// and writes the Markdown tables: the figures, the Service of 100,000 endpoints, and ipvsproxy's
// ratios against kube-proxy's nftables mode with the goals they are held to. Given several
// files, a later file's line for the same side and size replaces an earlier one's, so the newest
// measurement of each size is drawn.
//
//	go run ./cmd/daemonplot -o ../results/2026-12-04-vm-daemon [-md ../results/2026-12-04-vm-daemon.md] results1.json ...
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/harness/sideplot"
)

// figures is one side's line of a daemon-tier result; a figure the run did not reach is null.
type figures struct {
	Side               string   `json:"side"`
	Services           int      `json:"services"`
	OK                 bool     `json:"ok"`
	TimedOutAfter      *float64 `json:"timed_out_after_s"`
	PeakRSS            *float64 `json:"peak_rss_mib"`
	Ready              *float64 `json:"ready_s"`
	Connect            *float64 `json:"connect_s"`
	EndpointChange     *float64 `json:"endpoint_change_s"`
	NetworkProgramming *float64 `json:"network_programming_s"`
	SeenBy             string   `json:"endpoint_change_seen_by"`
	ColdSync           *float64 `json:"cold_sync_s"`
	FullCheck          *float64 `json:"full_resync_s"`
	PeriodicKind       string   `json:"periodic_sync_kind"`
	CPU                *float64 `json:"cpu_s"`
	RecheckTable       *int     `json:"recheck_read_from_table"`
	RecheckDumped      *int     `json:"recheck_read_dumped"`
	Series             *series  `json:"endpoint_series"`
	Big                *big     `json:"big"`
}

// series is the side's own network_programming_duration_seconds over the endpoint series
// (cmd/promhist's output).
type series struct {
	Written   int      `json:"written"`
	Pause     string   `json:"pause"`
	Count     int      `json:"count"`
	P50       *float64 `json:"p50"`
	P90       *float64 `json:"p90"`
	P99       *float64 `json:"p99"`
	Mean      *float64 `json:"mean"`
	MaxAtMost *float64 `json:"max_at_most"`
}

// big is the Service of many endpoints written while the side ran.
type big struct {
	Skipped            string   `json:"skipped"`
	Endpoints          int      `json:"endpoints"`
	Slices             *int     `json:"slices"`
	Writes             *float64 `json:"writes_s"`
	Programmed         *float64 `json:"programmed_s"`
	AfterLastWrite     *float64 `json:"after_last_write_s"`
	InKernel           int      `json:"in_kernel"`
	NotProgrammedAfter *float64 `json:"not_programmed_after_s"`
	Touch              *float64 `json:"touch_s"`
	TouchNP            *series  `json:"touch_network_programming"`
	PeakRSS            *float64 `json:"peak_rss_mib"`
	CPU                *float64 `json:"cpu_s"`
}

type sample struct {
	side     string
	services int
}

func main() {
	out := flag.String("o", "", "base name of the PNG files (BASE-peak-rss.png, ...)")
	md := flag.String("md", "", "the Markdown file to write (none when empty)")
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: daemonplot -o BASE [-md FILE] RESULTS.json...")
		os.Exit(2)
	}
	newest := map[sample]figures{}
	for _, name := range flag.Args() {
		if err := read(name, newest); err != nil {
			fmt.Fprintln(os.Stderr, "daemonplot:", err)
			os.Exit(1)
		}
	}
	for _, c := range charts {
		file := fmt.Sprintf("%s-%s.png", *out, c.file)
		drawn, err := sideplot.Draw(c.title, c.unit, points(newest, c.value), file)
		if err != nil {
			fmt.Fprintln(os.Stderr, "daemonplot:", err)
			os.Exit(1)
		}
		if drawn {
			fmt.Println(file)
		}
	}
	if *md != "" {
		if err := os.WriteFile(*md, []byte(markdown(newest)), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "daemonplot:", err)
			os.Exit(1)
		}
		fmt.Println(*md)
	}
}

var charts = []struct {
	file, title, unit string
	value             func(figures) *float64
}{
	{"peak-rss", "peak RSS of the process (VmHWM)", "MiB", func(f figures) *float64 { return f.PeakRSS }},
	{"ready", "start to ready (kube-proxy: its first sync)", "s", func(f figures) *float64 { return readyOnly(f, f.Ready) }},
	{"cold-sync", "the first (cold) sync", "s", func(f figures) *float64 { return readyOnly(f, f.ColdSync) }},
	{"full-recheck", "a periodic sync (ipvsproxy, IPVS mode: full; nftables, iptables: partial)", "s", func(f figures) *float64 { return readyOnly(f, f.FullCheck) }},
	{"endpoint-change-p50", "endpoint change, p50 of the side's network_programming_duration_seconds", "s", func(f figures) *float64 {
		if f.Series == nil {
			return nil
		}
		return f.Series.P50
	}},
	{"endpoint-change-p99", "endpoint change, p99 of the side's network_programming_duration_seconds", "s", func(f figures) *float64 {
		if f.Series == nil {
			return nil
		}
		return f.Series.P99
	}},
	{"big-programmed", "one Service of 100,000 endpoints: first write to all in the kernel", "s", func(f figures) *float64 {
		if f.Big == nil {
			return nil
		}
		return f.Big.Programmed
	}},
	{"big-peak-rss", "one Service of 100,000 endpoints: peak RSS meanwhile", "MiB", func(f figures) *float64 {
		if f.Big == nil {
			return nil
		}
		return f.Big.PeakRSS
	}},
}

func points(all map[sample]figures, value func(figures) *float64) map[string][]sideplot.Point {
	bySide := map[string][]sideplot.Point{}
	for s, f := range all {
		if v := value(f); v != nil {
			side := s.side
			if !f.OK {
				side += " (not ready: so far)"
			}
			bySide[side] = append(bySide[side], sideplot.Point{Services: s.services, Value: *v})
		}
	}
	return bySide
}

// readyOnly drops the times of a side that never became ready: they are of a run that did not
// finish, not a measurement.
func readyOnly(f figures, v *float64) *float64 {
	if !f.OK {
		return nil
	}
	return v
}

func read(name string, into map[sample]figures) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var fig figures
		if err := json.Unmarshal(sc.Bytes(), &fig); err != nil {
			return fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if fig.Side == "" || fig.Services <= 0 {
			return fmt.Errorf("%s:%d: no side or no Services", name, line)
		}
		into[sample{fig.Side, fig.Services}] = fig
	}
	return sc.Err()
}
