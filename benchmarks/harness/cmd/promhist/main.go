// Command promhist reads one histogram from two scrapes of a /metrics page
// (Prometheus text format) and prints, as one JSON object, what was observed
// between them: the count, the sum, p50/p90/p99 interpolated within the
// buckets as Prometheus' histogram_quantile does, and the upper bound of the
// highest bucket that gained an observation (the slowest one is at most
// that). The daemon tier scrapes each side before and after its series of
// endpoint changes and reads network_programming_duration_seconds with it.
//
//	promhist -metric kubeproxy_network_programming_duration_seconds [-label ip_family=IPv4] before.txt after.txt
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// observed is what a histogram gained between two scrapes: cumulative
// counts per upper bound, +Inf last.
type observed struct {
	Count   uint64   `json:"count"`
	Sum     float64  `json:"sum"`
	P50     *float64 `json:"p50"`
	P90     *float64 `json:"p90"`
	P99     *float64 `json:"p99"`
	MaxUpTo *float64 `json:"max_at_most"`
	// Buckets: [upper bound, observations at or under it] for each bound
	// that gained one, cumulative; "+Inf" is written as -1.
	Buckets [][2]float64 `json:"buckets"`
	bounds  []float64
	cum     []uint64
}

func main() {
	metric := flag.String("metric", "", "histogram name")
	var labels labelFilter
	flag.Var(&labels, "label", "NAME=VALUE a series must carry (repeatable); series that match are summed")
	flag.Parse()
	if *metric == "" || flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: promhist -metric NAME [-label NAME=VALUE]... BEFORE AFTER")
		os.Exit(2)
	}
	before, err := readFile(flag.Arg(0), *metric, labels)
	if err != nil {
		fail(err)
	}
	after, err := readFile(flag.Arg(1), *metric, labels)
	if err != nil {
		fail(err)
	}
	d, err := delta(before, after)
	if err != nil {
		fail(err)
	}
	out, _ := json.Marshal(d)
	fmt.Println(string(out))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "promhist:", err)
	os.Exit(1)
}

type labelFilter map[string]string

func (l *labelFilter) String() string { return fmt.Sprint(map[string]string(*l)) }
func (l *labelFilter) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not NAME=VALUE", s)
	}
	if *l == nil {
		*l = labelFilter{}
	}
	(*l)[k] = v
	return nil
}

func readFile(name, metric string, labels labelFilter) (*histogram, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h, err := read(f, metric, labels)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return h, nil
}

// histogram is the sum of the matching series of one scrape: cumulative
// count per upper bound (sorted, +Inf included).
type histogram struct {
	count uint64
	sum   float64
	cum   map[float64]uint64
}

// read parses a scrape and sums the series of metric whose labels match. A
// scrape without the metric is an empty histogram: a process that has not
// yet observed anything leaves its histogram out of /metrics.
func read(r io.Reader, metric string, labels labelFilter) (*histogram, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	h := &histogram{cum: map[float64]uint64{}}
	mf := families[metric]
	if mf == nil {
		return h, nil
	}
	if mf.GetType() != dto.MetricType_HISTOGRAM {
		return nil, fmt.Errorf("%s is a %s, not a histogram", metric, mf.GetType())
	}
	for _, m := range mf.GetMetric() {
		if !matches(m, labels) {
			continue
		}
		hist := m.GetHistogram()
		h.count += hist.GetSampleCount()
		h.sum += hist.GetSampleSum()
		for _, b := range hist.GetBucket() {
			// +Inf is the sample count, whether or not the scrape lists its bucket.
			if !math.IsInf(b.GetUpperBound(), 1) {
				h.cum[b.GetUpperBound()] += b.GetCumulativeCount()
			}
		}
		h.cum[math.Inf(1)] += hist.GetSampleCount()
	}
	return h, nil
}

func matches(m *dto.Metric, want labelFilter) bool {
	for k, v := range want {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k && lp.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// delta is what after gained over before. A count that went down means the
// two scrapes are of different processes.
func delta(before, after *histogram) (*observed, error) {
	if after.count < before.count {
		return nil, fmt.Errorf("the count went down (%d to %d): scrapes of two processes?", before.count, after.count)
	}
	d := &observed{Count: after.count - before.count, Sum: after.sum - before.sum}
	for b := range after.cum {
		d.bounds = append(d.bounds, b)
	}
	sort.Float64s(d.bounds)
	for _, b := range d.bounds {
		if after.cum[b] < before.cum[b] {
			return nil, fmt.Errorf("bucket le=%g went down: scrapes of two processes?", b)
		}
		d.cum = append(d.cum, after.cum[b]-before.cum[b])
	}
	if d.Count == 0 {
		return d, nil
	}
	d.P50, d.P90, d.P99 = d.quantile(0.5), d.quantile(0.9), d.quantile(0.99)
	for i, b := range d.bounds {
		if d.cum[i] == d.Count {
			if !math.IsInf(b, 1) {
				d.MaxUpTo = &b
			}
			break
		}
	}
	var prev uint64
	for i, b := range d.bounds {
		if d.cum[i] == prev {
			continue
		}
		prev = d.cum[i]
		if math.IsInf(b, 1) {
			b = -1
		}
		d.Buckets = append(d.Buckets, [2]float64{b, float64(d.cum[i])})
	}
	return d, nil
}

// quantile interpolates linearly inside the bucket that holds rank q*count,
// from the bucket's lower bound (0 for the first) to its upper bound, as
// Prometheus' histogram_quantile does; a rank in the +Inf bucket is the
// highest finite bound.
func (d *observed) quantile(q float64) *float64 {
	rank := q * float64(d.Count)
	var lower float64
	var below uint64
	for i, upper := range d.bounds {
		if float64(d.cum[i]) >= rank {
			if math.IsInf(upper, 1) {
				v := lower
				return &v
			}
			in := d.cum[i] - below
			v := upper
			if in > 0 {
				v = lower + (upper-lower)*(rank-float64(below))/float64(in)
			}
			v = math.Round(v*1000) / 1000
			return &v
		}
		lower, below = upper, d.cum[i]
	}
	return nil
}
