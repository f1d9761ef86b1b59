package main

import (
	"net/netip"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
)

func series(kv map[string]float64) metrics {
	m := metrics{series: map[string]float64{}, byName: map[string]float64{}}
	for k, v := range kv {
		m.series[k] = v
		name := k
		for i := range k {
			if k[i] == '{' {
				name = k[:i]
				break
			}
		}
		m.byName[name] += v
	}
	return m
}

// The proxy's histogram over the window is the difference of two scrapes,
// summed over both families; p99 is the bound of the bucket that holds it.
func TestHistogramOverTheWindow(t *testing.T) {
	const h = "kubeproxy_network_programming_duration_seconds"
	before := series(map[string]float64{
		h + `_bucket{ip_family="IPv4",le="0.25"}`: 10, h + `_bucket{ip_family="IPv4",le="0.5"}`: 10, h + `_bucket{ip_family="IPv4",le="1"}`: 10,
		h + `_bucket{ip_family="IPv4",le="2"}`: 12, h + `_bucket{ip_family="IPv4",le="+Inf"}`: 12,
	})
	after := series(map[string]float64{
		h + `_bucket{ip_family="IPv4",le="0.25"}`: 60, h + `_bucket{ip_family="IPv4",le="0.5"}`: 100, h + `_bucket{ip_family="IPv4",le="1"}`: 108,
		h + `_bucket{ip_family="IPv4",le="2"}`: 111, h + `_bucket{ip_family="IPv4",le="+Inf"}`: 112,
		h + `_bucket{ip_family="IPv6",le="0.25"}`: 0, h + `_bucket{ip_family="IPv6",le="0.5"}`: 0, h + `_bucket{ip_family="IPv6",le="1"}`: 0,
		h + `_bucket{ip_family="IPv6",le="2"}`: 0, h + `_bucket{ip_family="IPv6",le="+Inf"}`: 0,
	})
	bounds, counts := bucketCounts(before, after, h)
	if len(counts) != 5 || counts[len(counts)-1] != 100 || counts[2] != 98 {
		t.Fatalf("bounds %v counts %v", bounds, counts)
	}
	if got := histogramQuantile(0.99, bounds, counts); got != 2 {
		t.Errorf("p99 bucket %v, want 2 (98 of 100 within 1 s)", got)
	}
	if got := histogramQuantile(0.5, bounds, counts); got != 0.25 {
		t.Errorf("p50 bucket %v, want 0.25", got)
	}
}

// Raw latencies run from each change's trigger time to the kernel; a write
// that failed or a change never seen is counted apart, not as a latency.
// Percentiles are nearest-rank: 0.100 to 0.199 s but one change of 3 s.
func TestSummaryOfRawSamples(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var changes []change
	for i := range 100 {
		c := change{vs: ipvs.VirtualServerKey{Address: netip.MustParseAddr("10.96.0.1"), Port: 80, Protocol: ipvs.TCP}, trigger: t0.Add(time.Duration(i) * time.Second)}
		c.seen = c.trigger.Add(time.Duration(100+i) * time.Millisecond)
		changes = append(changes, c)
	}
	changes[7].seen = changes[7].trigger.Add(3 * time.Second)
	changes = append(changes, change{trigger: t0, writeErr: errTest{}}, change{trigger: t0})
	s := summarize(options{services: 1000, rate: 5}, changes, t0, t0.Add(100*time.Second), series(nil), series(nil), -1, -1)
	if s.WriteErrors != 1 || s.NotSeen != 1 || s.RawOver1s != 1 || *s.RawMax != 3 || *s.RawP50 != 0.15 || *s.RawP99 != 0.199 {
		t.Errorf("%+v (p50 %v p99 %v max %v)", s, *s.RawP50, *s.RawP99, *s.RawMax)
	}
}

type errTest struct{}

func (errTest) Error() string { return "refused" }
