package main

import (
	"bufio"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// metrics is one scrape of the proxy's /metrics: each series' value by its text
// (name{labels}), and the sums over a metric's series by name.
type metrics struct {
	series map[string]float64
	byName map[string]float64
}

func (m metrics) value(name string) float64 { return m.byName[name] }

func scrape(url string) (metrics, error) {
	c := http.Client{Timeout: 20 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return metrics{}, err
	}
	defer resp.Body.Close()
	m := metrics{series: map[string]float64{}, byName: map[string]float64{}}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		key := line[:i]
		m.series[key] = v
		name := key
		if j := strings.IndexByte(key, '{'); j >= 0 {
			name = key[:j]
		}
		m.byName[name] += v
	}
	return m, sc.Err()
}

// bucketCounts are a histogram's cumulative counts by upper bound, summed over its
// series (both families), as the difference of two scrapes.
func bucketCounts(before, after metrics, name string) (bounds []float64, counts []float64) {
	byBound := map[float64]float64{}
	for key, v := range after.series {
		if !strings.HasPrefix(key, name+"_bucket{") {
			continue
		}
		i := strings.Index(key, `le="`)
		if i < 0 {
			continue
		}
		rest := key[i+4:]
		le := rest[:strings.IndexByte(rest, '"')]
		b := math.Inf(1)
		if le != "+Inf" {
			if b, _ = strconv.ParseFloat(le, 64); b == 0 && le != "0" {
				continue
			}
		}
		byBound[b] += v - before.series[key]
	}
	for b := range byBound {
		bounds = append(bounds, b)
	}
	slices.Sort(bounds)
	for _, b := range bounds {
		counts = append(counts, byBound[b])
	}
	return bounds, counts
}

// histogramQuantile is the upper bound of the bucket holding quantile q (Prometheus's
// histogram_quantile would interpolate inside it; the bound is what is sure).
func histogramQuantile(q float64, bounds, counts []float64) float64 {
	if len(counts) == 0 || counts[len(counts)-1] == 0 {
		return math.NaN()
	}
	total := counts[len(counts)-1]
	for i, c := range counts {
		if c >= q*total {
			return bounds[i]
		}
	}
	return math.Inf(1)
}

type summary struct {
	Services       int      `json:"services"`
	Rate           float64  `json:"rate_per_s"`
	WindowS        float64  `json:"window_s"`
	Changes        int      `json:"changes"`
	WriteErrors    int      `json:"write_errors"`
	NotSeen        int      `json:"not_seen"`
	RawP50         *float64 `json:"raw_p50_s"`
	RawP90         *float64 `json:"raw_p90_s"`
	RawP99         *float64 `json:"raw_p99_s"`
	RawMax         *float64 `json:"raw_max_s"`
	RawOver1s      int      `json:"raw_over_1s"`
	HistCount      float64  `json:"hist_count"`
	HistUpTo1s     float64  `json:"hist_le_1s"`
	HistP99Bucket  *float64 `json:"hist_p99_le_s"`
	HistP50Bucket  *float64 `json:"hist_p50_le_s"`
	Rechecks       float64  `json:"rechecks"`
	RecheckMeanS   float64  `json:"recheck_mean_s"`
	PartialSyncs   float64  `json:"partial_syncs"`
	PartialMeanS   float64  `json:"partial_mean_s"`
	CPUS           float64  `json:"cpu_s"`
	CPUPerRecheckS float64  `json:"cpu_per_recheck_period_s"`
}

func summarize(o options, changes []change, start, ended time.Time, before, after metrics, cpu0, cpu1 float64) *summary {
	s := &summary{Services: o.services, Rate: o.rate, WindowS: round(ended.Sub(start).Seconds()), Changes: len(changes)}
	var lat []float64
	for _, c := range changes {
		switch {
		case c.writeErr != nil:
			s.WriteErrors++
		case c.seen.IsZero():
			s.NotSeen++
		default:
			l := c.seen.Sub(c.trigger).Seconds()
			lat = append(lat, l)
			if l > 1 {
				s.RawOver1s++
			}
		}
	}
	slices.Sort(lat)
	q := func(p float64) *float64 {
		if len(lat) == 0 {
			return nil
		}
		return finite(lat[min(len(lat)-1, int(math.Ceil(p*float64(len(lat))))-1)])
	}
	s.RawP50, s.RawP90, s.RawP99, s.RawMax = q(0.5), q(0.9), q(0.99), q(1)
	bounds, counts := bucketCounts(before, after, "kubeproxy_network_programming_duration_seconds")
	if len(counts) > 0 {
		s.HistCount = counts[len(counts)-1]
		for i, b := range bounds {
			if b <= 1 {
				s.HistUpTo1s = counts[i]
			}
		}
		s.HistP99Bucket, s.HistP50Bucket = finite(histogramQuantile(0.99, bounds, counts)), finite(histogramQuantile(0.5, bounds, counts))
	}
	delta := func(name string) float64 { return after.value(name) - before.value(name) }
	mean := func(hist string) float64 {
		if n := delta(hist + "_count"); n > 0 {
			return round(delta(hist+"_sum") / n)
		}
		return 0
	}
	if _, ours := after.byName["ipvsproxy_sync_full_total"]; ours {
		// Each sync is observed once per family in the histograms: the
		// counters count syncs.
		s.Rechecks, s.PartialSyncs = delta("ipvsproxy_sync_full_total"), delta("ipvsproxy_sync_partial_total")
		s.RecheckMeanS, s.PartialMeanS = mean("kubeproxy_sync_full_proxy_rules_duration_seconds"), mean("kubeproxy_sync_partial_proxy_rules_duration_seconds")
	} else {
		// kube-proxy's IPVS mode: every sync is full.
		families := math.Max(1, float64(len(keysWith(after, "kubeproxy_sync_proxy_rules_last_timestamp_seconds{"))))
		s.Rechecks = delta("kubeproxy_sync_proxy_rules_duration_seconds_count") / families
		s.RecheckMeanS = mean("kubeproxy_sync_proxy_rules_duration_seconds")
	}
	if cpu0 >= 0 && cpu1 >= 0 {
		s.CPUS = round(cpu1 - cpu0)
		if s.Rechecks > 0 {
			s.CPUPerRecheckS = round(s.CPUS / s.Rechecks)
		}
	}
	return s
}

func keysWith(m metrics, prefix string) []string {
	var out []string
	for k := range m.series {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

func round(v float64) float64 { return math.Round(v*1000) / 1000 }

// finite is v rounded, or nil (JSON null) when it is not a number or beyond the
// histogram's last bound.
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	r := round(v)
	return &r
}

// cpuSeconds is the process's user and system time, -1 when unknown.
func cpuSeconds(pid int) float64 {
	if pid <= 0 {
		return -1
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The command is in parentheses and may hold spaces: the fields follow the last ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return -1
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / 100 // USER_HZ
}

// writeSamples writes one line per change: its Service, virtual server, addresses,
// and the trigger, API answer and kernel times (Unix seconds), the latency.
func writeSamples(path string, changes []change) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "# service\tvirtual_server\tremoved\tadded\ttrigger_unix\tapi_answer_unix\tkernel_unix\tlatency_s\twrite_error")
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64)
	}
	for _, c := range changes {
		lat, e := "-", "-"
		if !c.seen.IsZero() && c.writeErr == nil {
			lat = strconv.FormatFloat(c.seen.Sub(c.trigger).Seconds(), 'f', 3, 64)
		}
		if c.writeErr != nil {
			e = strings.ReplaceAll(c.writeErr.Error(), "\t", " ")
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.service, c.vs, c.removed, c.added, ts(c.trigger), ts(c.acked), ts(c.seen), lat, e)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
