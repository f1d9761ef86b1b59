package suite

import "time"

// largestSilence is the longest time without a line in the observation
// window [from, to], given the lines' arrival times in order, and how many
// arrived in it. Silence counts from the window's start to its first line
// and from its last line to the window's end, not only between lines: a
// stream that stopped a second after the event it was to survive, or never
// started, is silent to the end and fails a "no gap" check. With no line in
// the window the whole window is silent.
func largestSilence(arrivals []time.Time, from, to time.Time) (time.Duration, int) {
	var longest time.Duration
	last, n := from, 0
	for _, at := range arrivals {
		if at.Before(from) || at.After(to) {
			continue
		}
		longest = max(longest, at.Sub(last))
		last = at
		n++
	}
	return max(longest, to.Sub(last)), n
}
