package main

import (
	"strconv"
	"strings"
	"testing"
)

// scrape is a /metrics page with network_programming_duration_seconds for
// two families, cumulative counts at 0.25, 0.5, 1, 2 and +Inf.
func scrape(v4, v6 [5]int, sum4 float64) string {
	var b strings.Builder
	b.WriteString("# HELP kubeproxy_network_programming_duration_seconds x\n# TYPE kubeproxy_network_programming_duration_seconds histogram\n")
	for _, s := range []struct {
		fam string
		c   [5]int
		sum float64
	}{{"IPv4", v4, sum4}, {"IPv6", v6, 1}} {
		for i, le := range []string{"0.25", "0.5", "1", "2", "+Inf"} {
			b.WriteString("kubeproxy_network_programming_duration_seconds_bucket{ip_family=\"" + s.fam + "\",le=\"" + le + "\"} " + strconv.Itoa(s.c[i]) + "\n")
		}
		b.WriteString("kubeproxy_network_programming_duration_seconds_sum{ip_family=\"" + s.fam + "\"} " + ftoa(s.sum) + "\n")
		b.WriteString("kubeproxy_network_programming_duration_seconds_count{ip_family=\"" + s.fam + "\"} " + strconv.Itoa(s.c[4]) + "\n")
	}
	return b.String()
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func observe(t *testing.T, before, after string, labels labelFilter) *observed {
	t.Helper()
	b, err := read(strings.NewReader(before), "kubeproxy_network_programming_duration_seconds", labels)
	if err != nil {
		t.Fatal(err)
	}
	a, err := read(strings.NewReader(after), "kubeproxy_network_programming_duration_seconds", labels)
	if err != nil {
		t.Fatal(err)
	}
	d, err := delta(b, a)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestQuantilesOfWhatWasObservedBetweenScrapes(t *testing.T) {
	// Before: 10 observations under 0.25 s. After: 50 more, 40 of them in
	// (0.25, 0.5], 9 in (0.5, 1], 1 in (1, 2].
	before := scrape([5]int{10, 10, 10, 10, 10}, [5]int{}, 1)
	after := scrape([5]int{10, 50, 59, 60, 60}, [5]int{3, 3, 3, 3, 3}, 30)
	d := observe(t, before, after, labelFilter{"ip_family": "IPv4"})
	if d.Count != 50 || d.Sum != 29 {
		t.Fatalf("count %d sum %g, want 50 and 29", d.Count, d.Sum)
	}
	// p50: rank 25 of 40 in (0.25, 0.5]: 0.25 + 0.25*25/40.
	if *d.P50 != 0.406 {
		t.Errorf("p50 %g, want 0.406", *d.P50)
	}
	// p90: rank 45, the 5th of 9 in (0.5, 1]: 0.5 + 0.5*5/9.
	if *d.P90 != 0.778 {
		t.Errorf("p90 %g, want 0.778", *d.P90)
	}
	// p99: rank 49.5, half of the one in (1, 2].
	if *d.P99 != 1.5 {
		t.Errorf("p99 %g, want 1.5", *d.P99)
	}
	if d.MaxUpTo == nil || *d.MaxUpTo != 2 {
		t.Errorf("slowest at most %v, want 2", d.MaxUpTo)
	}
	// The bounds that gained observations, cumulative, the last one all 50.
	want := [][2]float64{{0.5, 40}, {1, 49}, {2, 50}}
	if len(d.Buckets) != len(want) {
		t.Fatalf("buckets %v, want %v", d.Buckets, want)
	}
	for i := range want {
		if d.Buckets[i] != want[i] {
			t.Errorf("buckets %v, want %v", d.Buckets, want)
		}
	}
}

func TestSeriesThatMatchAreSummed(t *testing.T) {
	before := scrape([5]int{}, [5]int{}, 0)
	after := scrape([5]int{4, 4, 4, 4, 4}, [5]int{0, 4, 4, 4, 4}, 1)
	d := observe(t, before, after, nil)
	if d.Count != 8 {
		t.Fatalf("count %d, want both families' 8", d.Count)
	}
	if *d.P50 != 0.25 {
		t.Errorf("p50 %g, want 0.25 (the 4th of 8 at the top of the first bucket)", *d.P50)
	}
}

func TestObservationPastTheLastBoundIsTheHighestBound(t *testing.T) {
	d := observe(t, scrape([5]int{}, [5]int{}, 0), scrape([5]int{0, 0, 0, 0, 2}, [5]int{}, 700), labelFilter{"ip_family": "IPv4"})
	if *d.P99 != 2 || d.MaxUpTo != nil {
		t.Errorf("p99 %g, at most %v; want 2 and no bound", *d.P99, d.MaxUpTo)
	}
}

func TestNothingObservedHasNoQuantiles(t *testing.T) {
	s := scrape([5]int{1, 1, 1, 1, 1}, [5]int{}, 0)
	d := observe(t, s, s, nil)
	if d.Count != 0 || d.P50 != nil || d.P99 != nil {
		t.Errorf("%+v, want no observations and no quantiles", d)
	}
}

func TestMissingHistogramIsEmpty(t *testing.T) {
	d := observe(t, "# nothing yet\n", scrape([5]int{1, 1, 1, 1, 1}, [5]int{}, 0), labelFilter{"ip_family": "IPv4"})
	if d.Count != 1 {
		t.Errorf("count %d, want 1", d.Count)
	}
}

func TestCountGoingDownIsAnError(t *testing.T) {
	b, _ := read(strings.NewReader(scrape([5]int{5, 5, 5, 5, 5}, [5]int{}, 1)), "kubeproxy_network_programming_duration_seconds", nil)
	a, _ := read(strings.NewReader(scrape([5]int{1, 1, 1, 1, 1}, [5]int{}, 1)), "kubeproxy_network_programming_duration_seconds", nil)
	if _, err := delta(b, a); err == nil {
		t.Error("a count that went down was accepted")
	}
}
