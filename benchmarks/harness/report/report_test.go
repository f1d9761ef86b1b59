package report

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	"gonum.org/v1/plot"
)

// A run of a single shape gives each measured operation one point: its
// plot still has axes around it with labelled ticks to read it by (a log
// axis of one value has no range of its own), one line in our side's colour,
// and is written as a PNG; an operation without a measurement gets no plot.
func TestPlotOfASingleShapeShowsItsOnePoint(t *testing.T) {
	name := shape.Shape{Services: 100, Endpoints: 10}.Name()
	r := Report{Results: []shape.Result{{Side: Ours, Shape: name, Services: 100, Millis: map[string][]float64{shape.OpCold: {5}}}}}

	p, err := r.opPlot(shape.OpCold)
	if err != nil || p == nil {
		t.Fatalf("plot of the cold sync: %v, %v", p, err)
	}
	for _, axis := range []struct {
		name  string
		axis  plot.Axis
		value float64
	}{{"Services", p.X, 100}, {"latency", p.Y, 5}} {
		a := axis.axis
		if !(a.Min < axis.value && axis.value < a.Max) {
			t.Errorf("the %s axis spans %g to %g; the point %g is not inside it", axis.name, a.Min, a.Max, axis.value)
		}
		labelled := 0
		for _, tick := range a.Tick.Marker.Ticks(a.Min, a.Max) {
			if tick.Label != "" {
				labelled++
			}
		}
		if labelled == 0 {
			t.Errorf("the %s axis (%g to %g) has no labelled tick to read the point by", axis.name, a.Min, a.Max)
		}
	}
	for _, op := range shape.Ops {
		if op == shape.OpCold {
			continue
		}
		if p, err := r.opPlot(op); p != nil || err != nil {
			t.Errorf("%s: a plot (%v) without a measurement", op, err)
		}
	}

	base := filepath.Join(t.TempDir(), "one")
	if err := r.Write(base); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(plotFile(base, shape.OpCold))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the cold sync's plot is no PNG: %v", err)
	}
	// 6 × 4 inches at gonum's 96 dots an inch.
	if b := img.Bounds(); b.Dx() != 576 || b.Dy() != 384 {
		t.Errorf("plot is %d×%d, want 576×384", b.Dx(), b.Dy())
	}
	var ours, theirs int
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			switch img.At(x, y) {
			case sideColors[0]:
				ours++
			case sideColors[1]:
				theirs++
			}
		}
	}
	if ours == 0 || theirs != 0 {
		t.Errorf("%d pixels in our colour, %d in kube-proxy's; want some of ours and none of theirs", ours, theirs)
	}
	for _, op := range shape.Ops {
		if _, err := os.Stat(plotFile(base, op)); op != shape.OpCold && !os.IsNotExist(err) {
			t.Errorf("%s: %v; an operation without a measurement gets no plot file", plotFile(base, op), err)
		}
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
