package report

import (
	"fmt"
	"image/color"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// plots draws, per operation, p50 latency against Services on log scales,
// one line per side, base shape only (the mixed one has no kube-proxy run).
func (r Report) plots(base string) error {
	for _, op := range shape.Ops {
		p, err := r.opPlot(op)
		if err != nil {
			return err
		}
		if p == nil {
			continue
		}
		if err := p.Save(6*vg.Inch, 4*vg.Inch, plotFile(base, op)); err != nil {
			return fmt.Errorf("plot %s: %w", op, err)
		}
	}
	return nil
}

// plotFile is where the plot of op is written.
func plotFile(base, op string) string {
	return fmt.Sprintf("%s-%s.png", base, strings.NewReplacer(" ", "-", "%", "pct", ",", "").Replace(op))
}

// opPlot is the plot of op, nil when neither side measured it.
func (r Report) opPlot(op string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = op
	p.X.Label.Text = "Services (×10 endpoints)"
	p.Y.Label.Text = "p50 latency, ms"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	drawn := false
	for i, side := range []string{Ours, Theirs} {
		var pts plotter.XYs
		for _, s := range r.shapes() {
			if strings.HasSuffix(s.Shape, "-mix") {
				continue
			}
			if st := r.stat(side, s.Shape, op); st.Measured {
				// Log scales cannot show 0; a sub-microsecond sync is drawn at 1 µs.
				pts = append(pts, plotter.XY{X: float64(s.Services), Y: max(st.P50, 0.001)})
			}
		}
		if len(pts) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		c := sideColors[i]
		line.Color, points.Color = c, c
		points.Shape = draw.CircleGlyph{}
		p.Add(line, points)
		p.Legend.Add(side, line, points)
		drawn = true
	}
	if !drawn {
		return nil, nil
	}
	// One point (or one value) leaves a log axis without a range.
	if p.X.Min == p.X.Max {
		p.X.Min, p.X.Max = p.X.Min/2, p.X.Max*2
	}
	if p.Y.Min == p.Y.Max {
		p.Y.Min, p.Y.Max = p.Y.Min/2, p.Y.Max*2
	}
	return p, nil
}

// sideColors are Ours' and Theirs' colours.
var sideColors = []color.Color{color.RGBA{B: 200, A: 255}, color.RGBA{R: 200, A: 255}}
