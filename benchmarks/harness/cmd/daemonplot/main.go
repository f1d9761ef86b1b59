// Command daemonplot draws the daemon tier's figures (e2e/vm/bench-daemon.sh's
// JSON lines, one object per side and size) against the number of Services:
// peak RSS, time to ready and the cold sync, one line per side, on log
// scales. Given several files, a later file's figure for the same side and
// size replaces an earlier one's, so the newest measurement of each size is
// drawn.
//
//	go run ./cmd/daemonplot -o ../results/2026-12-04-vm-daemon results1.json results2.json ...
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"os"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// figures is one side's line of a daemon-tier result; a figure the run did
// not reach is null.
type figures struct {
	Side      string   `json:"side"`
	Services  int      `json:"services"`
	OK        bool     `json:"ok"`
	PeakRSS   *float64 `json:"peak_rss_mib"`
	Ready     *float64 `json:"ready_s"`
	ColdSync  *float64 `json:"cold_sync_s"`
	FullCheck *float64 `json:"full_resync_s"`
}

type sample struct {
	side     string
	services int
}

func main() {
	out := flag.String("o", "", "base name of the PNG files (BASE-peak-rss.png, ...)")
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: daemonplot -o BASE RESULTS.json...")
		os.Exit(2)
	}
	newest := map[sample]figures{}
	for _, name := range flag.Args() {
		if err := read(name, newest); err != nil {
			fmt.Fprintln(os.Stderr, "daemonplot:", err)
			os.Exit(1)
		}
	}
	charts := []struct {
		file, title, unit string
		value             func(figures) *float64
	}{
		{"peak-rss", "peak RSS of the process (VmHWM)", "MiB", func(f figures) *float64 { return f.PeakRSS }},
		{"ready", "start to ready (kube-proxy: its first sync)", "s", func(f figures) *float64 { return readyOnly(f, f.Ready) }},
		{"cold-sync", "the first (cold) sync", "s", func(f figures) *float64 { return readyOnly(f, f.ColdSync) }},
		{"full-recheck", "a periodic full re-check", "s", func(f figures) *float64 { return readyOnly(f, f.FullCheck) }},
	}
	for _, c := range charts {
		file := fmt.Sprintf("%s-%s.png", *out, c.file)
		drawn, err := chart(newest, c.title, c.unit, c.value, file)
		if err != nil {
			fmt.Fprintln(os.Stderr, "daemonplot:", err)
			os.Exit(1)
		}
		if drawn {
			fmt.Println(file)
		}
	}
}

// readyOnly drops the times of a side that never became ready: they are of
// a run that did not finish, not a measurement.
func readyOnly(f figures, v *float64) *float64 {
	if !f.OK {
		return nil
	}
	return v
}

func read(name string, into map[sample]figures) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var fig figures
		if err := json.Unmarshal(sc.Bytes(), &fig); err != nil {
			return fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if fig.Side == "" || fig.Services <= 0 {
			return fmt.Errorf("%s:%d: no side or no Services", name, line)
		}
		into[sample{fig.Side, fig.Services}] = fig
	}
	return sc.Err()
}

// chart draws one figure against Services, a line per side; false when no
// side has the figure.
func chart(all map[sample]figures, title, unit string, value func(figures) *float64, file string) (bool, error) {
	bySide := map[string]plotter.XYs{}
	for s, f := range all {
		if v := value(f); v != nil && *v > 0 {
			side := s.side
			if !f.OK {
				side += " (not ready: so far)"
			}
			bySide[side] = append(bySide[side], plotter.XY{X: float64(s.services), Y: *v})
		}
	}
	if len(bySide) == 0 {
		return false, nil
	}
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
	palette := []color.Color{color.RGBA{B: 200, A: 255}, color.RGBA{R: 200, A: 255}, color.RGBA{G: 150, A: 255}, color.RGBA{R: 150, B: 150, A: 255}}
	for i, side := range sides {
		pts := bySide[side]
		slices.SortFunc(pts, func(a, b plotter.XY) int { return int(a.X - b.X) })
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return false, err
		}
		c := palette[i%len(palette)]
		line.Color, points.Color = c, c
		points.Shape = draw.CircleGlyph{}
		p.Add(line, points)
		p.Legend.Add(side, line, points)
	}
	// One point leaves a log axis without a range.
	if p.X.Min == p.X.Max {
		p.X.Min, p.X.Max = p.X.Min/2, p.X.Max*2
	}
	if p.Y.Min == p.Y.Max {
		p.Y.Min, p.Y.Max = p.Y.Min/2, p.Y.Max*2
	}
	return true, p.Save(6*vg.Inch, 4*vg.Inch, file)
}
