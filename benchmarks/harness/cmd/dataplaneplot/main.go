// Command dataplaneplot draws the data-plane tier's figures (bench-dataplane-guest.sh's JSON
// lines, one object per side, size and table state) against the number of Services, a line per
// side and the no-proxy baseline, on log scales, and writes the Markdown tables: the figures per
// table state, ipvsproxy's ratios against kube-proxy's nftables mode (same boot), and how each
// side's figures move from the smallest size to the largest, each divided by the no-proxy
// baseline of its own boot. Given several files, a later line for the same side, size and
// state replaces an earlier one.
//
//	go run ./cmd/dataplaneplot -o ../results/2026-12-07-vm-dataplane -md ../results/2026-12-07-vm-dataplane.md results.json ...
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/harness/sideplot"
)

// connect is loadgen connect's output.
type connect struct {
	N      int      `json:"n"`
	Failed int      `json:"failed"`
	P50    *float64 `json:"p50_ms"`
	P99    *float64 `json:"p99_ms"`
	Over1s int      `json:"over_1s"`
}

// rate is loadgen rate's output.
type rate struct {
	PerSecond  *float64 `json:"per_s"`
	Failed     int      `json:"failed"`
	CPUPerConn *float64 `json:"guest_cpu_ms_per_conn"`
}

// udp is loadgen udp's output.
type udp struct {
	PerSecond *float64 `json:"per_s"`
	Lost      int      `json:"lost"`
}

// round is one side's measurements at one size and table state.
type round struct {
	Side        string              `json:"side"`
	Services    int                 `json:"services"`
	Table       string              `json:"table"`
	Connect     map[string]*connect `json:"connect"`
	Rate        *rate               `json:"rate"`
	IperfBits   *float64            `json:"iperf_bits_per_s"`
	UDP         *udp                `json:"udp"`
	Held        *int                `json:"held"`
	Conntrack   *int                `json:"conntrack_entries"`
	IPVSConns   *int                `json:"ipvs_connections"`
	FirstCIP    string              `json:"first_clusterip_service"`
	LastCIP     string              `json:"last_clusterip_service"`
	RulesBefore *int                `json:"kube_services_rules"`
}

type key struct {
	side     string
	services int
	table    string
}

// The four timed paths, in the order the tables show them.
var paths = []struct{ key, title string }{
	{"pod_clusterip_first", "pod → ClusterIP, first Service"},
	{"pod_clusterip_last", "pod → ClusterIP, last Service"},
	{"outside_nodeport_first", "outside → NodePort, first Service"},
	{"outside_nodeport_last", "outside → NodePort, last Service"},
}

// figure is one number of a round, and whether a larger one is better.
type figure struct {
	file, title, unit string
	higherIsBetter    bool
	value             func(round) *float64
}

func connectP(path string, p99 bool) func(round) *float64 {
	return func(r round) *float64 {
		c := r.Connect[path]
		if c == nil {
			return nil
		}
		if p99 {
			return c.P99
		}
		return c.P50
	}
}

var figures = []figure{
	{"connect-pod-clusterip-first-p50", "TCP connect p50, pod → ClusterIP, first Service", "ms", false, connectP("pod_clusterip_first", false)},
	{"connect-pod-clusterip-last-p50", "TCP connect p50, pod → ClusterIP, last Service", "ms", false, connectP("pod_clusterip_last", false)},
	{"connect-pod-clusterip-last-p99", "TCP connect p99, pod → ClusterIP, last Service", "ms", false, connectP("pod_clusterip_last", true)},
	{"connect-outside-nodeport-first-p50", "TCP connect p50, outside → NodePort, first Service", "ms", false, connectP("outside_nodeport_first", false)},
	{"connect-outside-nodeport-last-p50", "TCP connect p50, outside → NodePort, last Service", "ms", false, connectP("outside_nodeport_last", false)},
	{"connect-outside-nodeport-last-p99", "TCP connect p99, outside → NodePort, last Service", "ms", false, connectP("outside_nodeport_last", true)},
	{"new-connections-per-s", "new connections per second, pod → ClusterIP", "connections/s", true, func(r round) *float64 {
		if r.Rate == nil {
			return nil
		}
		return r.Rate.PerSecond
	}},
	{"cpu-per-connection", "guest CPU per new connection", "ms", false, func(r round) *float64 {
		if r.Rate == nil {
			return nil
		}
		return r.Rate.CPUPerConn
	}},
	{"iperf-throughput", "one established flow (iperf3), pod → ClusterIP", "Gbit/s", true, func(r round) *float64 {
		if r.IperfBits == nil {
			return nil
		}
		g := *r.IperfBits / 1e9
		return &g
	}},
	{"udp-per-s", "UDP request/response, a new source port each", "exchanges/s", true, func(r round) *float64 {
		if r.UDP == nil {
			return nil
		}
		return r.UDP.PerSecond
	}},
}

func main() {
	out := flag.String("o", "", "base name of the PNG files (BASE-empty-connect-….png, ...)")
	md := flag.String("md", "", "the Markdown file to write (none when empty)")
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: dataplaneplot -o BASE [-md FILE] RESULTS.json...")
		os.Exit(2)
	}
	all := map[key]round{}
	for _, name := range flag.Args() {
		if err := read(name, all); err != nil {
			fmt.Fprintln(os.Stderr, "dataplaneplot:", err)
			os.Exit(1)
		}
	}
	for _, table := range []string{"empty", "held"} {
		for _, f := range figures {
			bySide := map[string][]sideplot.Point{}
			for k, r := range all {
				if k.table != table {
					continue
				}
				if v := f.value(r); v != nil {
					bySide[k.side] = append(bySide[k.side], sideplot.Point{Services: k.services, Value: *v})
				}
			}
			title := f.title
			if table == "held" {
				title += ", connections held"
			}
			file := fmt.Sprintf("%s-%s-%s.png", *out, table, f.file)
			drawn, err := sideplot.Draw(title, f.unit, bySide, file)
			if err != nil {
				fmt.Fprintln(os.Stderr, "dataplaneplot:", err)
				os.Exit(1)
			}
			if drawn {
				fmt.Println(file)
			}
		}
	}
	if *md != "" {
		if err := os.WriteFile(*md, []byte(markdown(all)), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "dataplaneplot:", err)
			os.Exit(1)
		}
		fmt.Println(*md)
	}
}

func read(name string, into map[key]round) error {
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
		var r round
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if r.Side == "" || r.Services <= 0 || r.Table == "" {
			return fmt.Errorf("%s:%d: no side, Services or table state", name, line)
		}
		into[key{r.Side, r.Services, r.Table}] = r
	}
	return sc.Err()
}
