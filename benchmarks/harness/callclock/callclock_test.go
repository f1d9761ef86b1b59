package callclock

import (
	"slices"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
)

func TestClockAddsUpByKindAndResets(t *testing.T) {
	c := New()
	past := time.Now().Add(-3 * time.Millisecond)
	c.Since("ipset add (a process)", past)
	c.Since("ipset add (a process)", past)
	c.Since("ipvs AddRealServer (netlink)", time.Now())
	calls := c.Reset()
	add := calls["ipset add (a process)"]
	if add.Calls != 2 || add.Millis < 6 {
		t.Errorf("ipset add: %+v, want 2 calls of at least 3 ms each", add)
	}
	if got := calls["ipvs AddRealServer (netlink)"].Calls; got != 1 {
		t.Errorf("AddRealServer calls %d, want 1", got)
	}
	if names := Names(calls); !slices.Equal(names, []string{"ipset add (a process)", "ipvs AddRealServer (netlink)"}) {
		t.Errorf("Names %v: want the longest first", names)
	}
	if total := Total(calls); total < add.Millis {
		t.Errorf("Total %.3f below one kind's %.3f", total, add.Millis)
	}
	if after := c.Reset(); len(after) != 0 {
		t.Errorf("after Reset the clock still holds %v", after)
	}
}

func TestAddSumsRepeatsOfAnOperation(t *testing.T) {
	first := map[string]shape.CallTime{"ipvs VirtualServers": {Millis: 2, Calls: 1}}
	second := map[string]shape.CallTime{"ipvs VirtualServers": {Millis: 3, Calls: 1}, "ipset Sets": {Millis: 1, Calls: 1}}
	sum := Add(Add(nil, first), second)
	if got := sum["ipvs VirtualServers"]; got != (shape.CallTime{Millis: 5, Calls: 2}) {
		t.Errorf("VirtualServers %+v, want 5 ms over 2 calls", got)
	}
	if got := sum["ipset Sets"]; got != (shape.CallTime{Millis: 1, Calls: 1}) {
		t.Errorf("Sets %+v, want 1 ms over 1 call", got)
	}
	if first["ipvs VirtualServers"].Calls != 1 {
		t.Errorf("Add changed its second argument's source: %+v", first)
	}
}
