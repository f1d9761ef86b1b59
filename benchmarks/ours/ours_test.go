package ours

import (
	"testing"

	"github.com/go-logr/logr"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"k8s.io/klog/v2"
)

// The harness works on a small shape: every operation ran, the partial
// ones were partial, the restart wrote nothing (Run checks both).
func TestRunSmallShape(t *testing.T) {
	klog.SetLogger(logr.Discard())
	for _, s := range []shape.Shape{{Services: 100, Endpoints: 10}, {Services: 100, Endpoints: 10, Mix: true}} {
		res, err := Run(s, FakeKernel(netif.NewFake(owned.DummyInterface)), 2)
		if err != nil {
			t.Fatalf("%s: %v", s.Name(), err)
		}
		for _, op := range shape.Ops {
			want := 2
			if op == shape.OpCold {
				want = 1
			}
			if len(res.Millis[op]) != want {
				t.Errorf("%s: %s ran %d times, want %d", s.Name(), op, len(res.Millis[op]), want)
			}
		}
		families := 1
		if s.Mix {
			families = 2
		}
		if res.Writes[shape.OpNoop] != 0 || res.Writes[shape.OpFullResync] != 0 || res.Writes[shape.OpEndpointAdd] != families {
			t.Errorf("%s: writes %v; want none for no-op and resync, one real server per family for an endpoint added", s.Name(), res.Writes)
		}
	}
}
