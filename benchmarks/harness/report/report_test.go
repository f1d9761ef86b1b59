package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
)

// One shape draws one point per line: the log axes still get a range.
func TestPlotsOfOneShape(t *testing.T) {
	name := shape.Shape{Services: 100, Endpoints: 10}.Name()
	r := Report{Results: []shape.Result{{Side: Ours, Shape: name, Services: 100, Millis: map[string][]float64{shape.OpCold: {5}}}}}
	if err := r.Write(filepath.Join(t.TempDir(), "one")); err != nil {
		t.Fatal(err)
	}
}

func TestReportTableRatiosAndPlots(t *testing.T) {
	r := Report{Date: "2026-12-01T00:00:00Z", Host: "h", CPUs: 2, Pairs: 1, Repeats: 2}
	for _, n := range []int{100, 1000} {
		name := shape.Shape{Services: n, Endpoints: 10}.Name()
		ours := shape.Result{Side: Ours, Shape: name, Services: n, Millis: map[string][]float64{}, PeakRSS: 50}
		theirs := shape.Result{Side: Theirs, Shape: name, Services: n, Millis: map[string][]float64{}, PeakRSS: 100}
		for _, op := range shape.Ops {
			ours.Millis[op] = []float64{1, 3}
			theirs.Millis[op] = []float64{20, 40}
		}
		r.Results = append(r.Results, ours, theirs)
	}
	md := r.Markdown()
	for _, want := range []string{"### 100x10", "| cold full sync | 20.0 (40.0) | 1.0 (3.0) | 1/20 |", "| peak RSS | 100 MB | 50 MB | 0.50 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
	base := filepath.Join(t.TempDir(), "run")
	if err := r.Write(base); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{base + ".json", base + ".md", base + "-cold-full-sync.png", base + "-1pct-of-endpoints-churned.png"} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}
