package suite

import (
	"testing"
	"time"
)

// The silence of a stream is measured to the ends of the observation
// window: a stream that dies early or starts late shows it, and one with no
// line at all is silent throughout. Measured only between lines, a stream
// that stopped a second after the event still looked unbroken.
func TestLargestSilenceCountsToTheEndsOfTheWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s*1000) * time.Millisecond) }
	every := func(from, to, step float64) []time.Time {
		var out []time.Time
		for i := 0; i <= int((to-from)/step+0.5); i++ {
			out = append(out, t0.Add(time.Duration((from+float64(i)*step)*1000)*time.Millisecond))
		}
		return out
	}
	for _, c := range []struct {
		name     string
		arrivals []time.Time
		from, to float64
		want     float64
		lines    int
	}{
		{"steady to the end", every(0, 30, 0.1), 0, 30, 0.1, 301},
		{"a pause in the middle", append(every(0, 10, 0.1), every(13, 30, 0.1)...), 0, 30, 3, 272},
		{"died a second after the event", every(0, 11, 0.1), 0, 30, 19, 111},
		{"started late", every(8, 30, 0.1), 0, 30, 8, 221},
		{"no line", nil, 0, 30, 30, 0},
		{"lines outside the window do not count", every(0, 40, 0.1), 10, 20, 0.1, 101},
		{"one line in the window", []time.Time{at(5), at(15), at(35)}, 10, 30, 15, 1},
	} {
		gap, n := largestSilence(c.arrivals, at(c.from), at(c.to))
		if d := gap.Seconds() - c.want; d > 1e-6 || d < -1e-6 || n != c.lines {
			t.Errorf("%s: silence %.3f s over %d lines, want %.3f s over %d", c.name, gap.Seconds(), n, c.want, c.lines)
		}
	}
}
