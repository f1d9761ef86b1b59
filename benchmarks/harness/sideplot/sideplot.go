// Package sideplot draws the daemon and data-plane tiers' figures: one value against the
// number of Services, a line per side, on log scales, each side in the same color in every
// chart.
package sideplot

import (
	"image/color"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Point is one side's value at a number of Services.
type Point struct {
	Services int
	Value    float64
}

// colors keeps a side's color from chart to chart; sides not named here take the others.
var colors = map[string]color.Color{
	"ipvsproxy":           color.RGBA{B: 200, A: 255},
	"kube-proxy-nftables": color.RGBA{R: 200, A: 255},
	"kube-proxy-iptables": color.RGBA{R: 230, G: 140, A: 255},
	"kube-proxy-ipvs":     color.RGBA{G: 150, A: 255},
	"kube-proxy":          color.RGBA{G: 150, A: 255},
	"no-proxy":            color.RGBA{R: 120, G: 120, B: 120, A: 255},
}

var others = []color.Color{color.RGBA{R: 150, B: 150, A: 255}, color.RGBA{G: 150, B: 150, A: 255}, color.RGBA{R: 100, G: 60, A: 255}}

// Draw saves the chart to file (PNG, 6×4 in); false and no file when no side has a positive
// value (a log axis cannot show the others).
func Draw(title, unit string, bySide map[string][]Point, file string) (bool, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "Services (×10 endpoints)"
	p.Y.Label.Text = unit
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	sides := make([]string, 0, len(bySide))
	for side := range bySide {
		sides = append(sides, side)
	}
	slices.Sort(sides)
	drawn, other := false, 0
	for _, side := range sides {
		var pts plotter.XYs
		for _, pt := range bySide[side] {
			if pt.Value > 0 && pt.Services > 0 {
				pts = append(pts, plotter.XY{X: float64(pt.Services), Y: pt.Value})
			}
		}
		if len(pts) == 0 {
			continue
		}
		slices.SortFunc(pts, func(a, b plotter.XY) int { return int(a.X - b.X) })
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return false, err
		}
		c, ok := colors[side]
		if !ok {
			c = others[other%len(others)]
			other++
		}
		line.Color, points.Color = c, c
		points.Shape = draw.CircleGlyph{}
		p.Add(line, points)
		p.Legend.Add(side, line, points)
		drawn = true
	}
	if !drawn {
		return false, nil
	}
	// One point (or one value) leaves a log axis without a range.
	if p.X.Min == p.X.Max {
		p.X.Min, p.X.Max = p.X.Min/2, p.X.Max*2
	}
	if p.Y.Min == p.Y.Max {
		p.Y.Min, p.Y.Max = p.Y.Min/2, p.Y.Max*2
	}
	return true, p.Save(6*vg.Inch, 4*vg.Inch, file)
}
