// Package report turns the results of the benchmark processes into the
// JSON record, a Markdown table (ours beside kube-proxy's, with ratios) and
// PNG plots of latency against the number of Services (log scales).
package report

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
)

// The two sides.
const (
	Ours   = "ipvsproxy"
	Theirs = "kube-proxy"
)

// Report is one harness run.
type Report struct {
	Date    string         `json:"date"`
	Host    string         `json:"host"`
	CPUs    int            `json:"cpus"`
	Kernel  string         `json:"kernel"`
	Pairs   int            `json:"pairs"`
	Repeats int            `json:"repeats"`
	Results []shape.Result `json:"results"`
	// Notes say where merged results come from.
	Notes []string `json:"notes,omitempty"`
}

// Stat summarizes one operation of one side on one shape.
type Stat struct {
	N        int
	P50, P99 float64 // milliseconds
	Writes   int
	Measured bool
}

// stat pools every process's samples of op.
func (r Report) stat(side, shapeName, op string) Stat {
	var all []float64
	st := Stat{}
	for _, res := range r.Results {
		if res.Side == side && res.Shape == shapeName {
			all = append(all, res.Millis[op]...)
			if w, ok := res.Writes[op]; ok {
				st.Writes = w
			}
		}
	}
	if len(all) == 0 {
		return st
	}
	sort.Float64s(all)
	st.N, st.Measured = len(all), true
	st.P50 = quantile(all, 0.5)
	st.P99 = quantile(all, 0.99)
	return st
}

// quantile is the nearest-rank quantile of sorted samples.
func quantile(sorted []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func (r Report) peakRSS(side, shapeName string) float64 {
	peak := 0.0
	for _, res := range r.Results {
		if res.Side == side && res.Shape == shapeName {
			peak = max(peak, res.PeakRSS)
		}
	}
	return peak
}

// shapes lists the shapes in the order they ran.
func (r Report) shapes() []shape.Result {
	var out []shape.Result
	for _, res := range r.Results {
		if !slices.ContainsFunc(out, func(o shape.Result) bool { return o.Shape == res.Shape }) {
			out = append(out, res)
		}
	}
	return out
}

// Progress is the line printed when a shape is done.
func (r Report) Progress(shapeName string, took time.Duration) string {
	var parts []string
	for _, op := range []string{shape.OpCold, shape.OpEndpointRemove, shape.OpNoop, shape.OpFullResync} {
		o, t := r.stat(Ours, shapeName, op), r.stat(Theirs, shapeName, op)
		s := fmt.Sprintf("%s %s", op, ms(o.P50))
		if t.Measured {
			s += fmt.Sprintf(" vs %s (%s)", ms(t.P50), ratio(o.P50, t.P50))
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ") + fmt.Sprintf("; peak RSS %.0f MB vs %.0f MB; took %.0fs",
		r.peakRSS(Ours, shapeName), r.peakRSS(Theirs, shapeName), took.Seconds())
}

// Markdown renders the table of every shape.
func (r Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run %s on %s (%d CPUs, kernel %s): %d process pair(s) per shape, each operation repeated %d times per process; p50 (p99) in ms; ratio = ipvsproxy p50 / kube-proxy p50.\n\n",
		r.Date, r.Host, r.CPUs, r.Kernel, r.Pairs, r.Repeats)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- merged: %s\n", n)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
	}
	for _, s := range r.shapes() {
		fmt.Fprintf(&b, "### %s\n\n| operation | kube-proxy | ipvsproxy | ratio | ipvsproxy writes |\n|---|---|---|---|---|\n", s.Shape)
		for _, op := range shape.Ops {
			o, t := r.stat(Ours, s.Shape, op), r.stat(Theirs, s.Shape, op)
			theirs, rat := "–", "–"
			if t.Measured {
				theirs, rat = fmt.Sprintf("%s (%s)", ms(t.P50), ms(t.P99)), ratio(o.P50, t.P50)
			}
			fmt.Fprintf(&b, "| %s | %s | %s (%s) | %s | %d |\n", op, theirs, ms(o.P50), ms(o.P99), rat, o.Writes)
		}
		fmt.Fprintf(&b, "| peak RSS | %s | %.0f MB | %s | |\n\n", rss(r.peakRSS(Theirs, s.Shape)), r.peakRSS(Ours, s.Shape),
			ratio(r.peakRSS(Ours, s.Shape), r.peakRSS(Theirs, s.Shape)))
	}
	return b.String()
}

func rss(mb float64) string {
	if mb == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f MB", mb)
}

func ms(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func ratio(ours, theirs float64) string {
	if theirs == 0 || ours == 0 {
		return "–"
	}
	switch r := ours / theirs; {
	case r < 0.5:
		return fmt.Sprintf("1/%.0f", 1/r)
	case r < 1:
		return fmt.Sprintf("%.2f", r)
	default:
		return fmt.Sprintf("%.1f×", r)
	}
}

// Write stores base.json, base.md and base-<op>.png.
func (r Report) Write(base string) error {
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".json", append(j, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(base+".md", []byte(r.Markdown()), 0o644); err != nil {
		return err
	}
	return r.plots(base)
}
