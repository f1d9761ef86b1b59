// Package callclock adds up the wall time a benchmark side spends in each
// kind of kernel call ("ipvs AddRealServer", "ipset add (a process each)"),
// so that a cold sync on the real kernel splits into the kernel's share per
// kind of call and the side's own work (the rest). kernel-bench times
// ipvsproxy's adapters with it, kubeproxy-bench kube-proxy's.
package callclock

import (
	"sort"
	"sync"
	"time"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
)

// Clock holds the time per kind of call since its last Reset. It is safe
// for concurrent use: kube-proxy's sync loop runs in its own goroutine.
type Clock struct {
	mu    sync.Mutex
	calls map[string]shape.CallTime
}

// New returns an empty Clock.
func New() *Clock { return &Clock{calls: map[string]shape.CallTime{}} }

// Since adds one call of kind name that started at start; deferred as
// defer c.Since(name, time.Now()).
func (c *Clock) Since(name string, start time.Time) {
	took := time.Since(start)
	c.mu.Lock()
	defer c.mu.Unlock()
	ct := c.calls[name]
	ct.Millis += float64(took.Microseconds()) / 1000
	ct.Calls++
	c.calls[name] = ct
}

// Reset starts a new count, returning the old one.
func (c *Clock) Reset() map[string]shape.CallTime {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := c.calls
	c.calls = map[string]shape.CallTime{}
	return calls
}

// Total is the time spent in every call.
func Total(calls map[string]shape.CallTime) float64 {
	var sum float64
	for _, ct := range calls {
		sum += ct.Millis
	}
	return sum
}

// Names lists the kinds of call, the longest first.
func Names(calls map[string]shape.CallTime) []string {
	out := make([]string, 0, len(calls))
	for n := range calls {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return calls[out[i]].Millis > calls[out[j]].Millis })
	return out
}

// Add adds more's calls to sum (a new map when sum is nil) and returns it:
// an operation repeated several times, counted once.
func Add(sum, more map[string]shape.CallTime) map[string]shape.CallTime {
	if sum == nil {
		sum = map[string]shape.CallTime{}
	}
	for n, ct := range more {
		s := sum[n]
		s.Millis += ct.Millis
		s.Calls += ct.Calls
		sum[n] = s
	}
	return sum
}
