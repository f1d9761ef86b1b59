package sharedslices

import (
	"runtime"
	"testing"
)

func list(n, from int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

// Equal slices share one copy; different ones, or ones of another length
// with the same start, do not; a slice shorter than Min is kept as is.
func TestEqualSlicesShareOneCopy(t *testing.T) {
	tb := New[int](4)
	a := tb.Share(list(10, 0))
	b := tb.Share(list(10, 0))
	if &a[0] != &b[0] || len(b) != 10 {
		t.Fatal("two equal slices are two copies")
	}
	if c := tb.Share(list(10, 1)); &c[0] == &a[0] {
		t.Fatal("a different slice got the shared copy")
	}
	if d := tb.Share(list(9, 0)); &d[0] == &a[0] || len(d) != 9 {
		t.Fatal("a shorter slice with the same start got the shared copy")
	}
	short := list(3, 0)
	if e := tb.Share(short); &e[0] != &short[0] {
		t.Fatal("a slice shorter than Min was copied or shared")
	}
	runtime.KeepAlive(a)
}

// A copy no holder keeps is collected, and the table forgets it: it holds
// its copies weakly.
func TestACopyNoHolderKeepsIsCollected(t *testing.T) {
	tb := New[int](1)
	for i := range 3 * sweepEvery {
		tb.Share(list(100, i))
	}
	runtime.GC()
	runtime.GC()
	tb.Share(list(100, -1)) // at most sweepEvery more, then a sweep
	for i := range sweepEvery {
		tb.Share(list(100, -2-i))
	}
	if n := tb.Len(); n > 2*sweepEvery {
		t.Errorf("the table holds %d copies after %d were dropped by their holders", n, 3*sweepEvery)
	}
}
