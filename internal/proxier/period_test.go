package proxier

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
)

// slowListing makes every listing of the virtual servers, which each full
// sync's read starts with, take a while: a full re-check longer than the
// sync period, as at 20,000 Services on a slow node.
type slowListing struct {
	ipvs.Interface
	took time.Duration
}

func (s slowListing) VirtualServers() ([]ipvs.VirtualServer, error) {
	time.Sleep(s.took)
	return s.Interface.VirtualServers()
}

// A full re-check longer than --ipvs-sync-period must not start the next
// one as soon as it ends: the writer would do nothing but re-checks, and
// every endpoint change would wait behind one (the daemon at 20,000
// Services under emulation did, its re-checks 32-45 s for a 30 s period).
// The next period counts from the end of the re-check, as kube-proxy's
// runner counts its sync period from the end of its last sync.
func TestPeriodCountsFromTheEndOfTheRecheck(t *testing.T) {
	const period, recheck = 20 * time.Millisecond, 60 * time.Millisecond
	fk := newFakeKernel()
	k := fk.kernel()
	k.IPVS = slowListing{Interface: fk.ipvs, took: recheck}
	cfg := testConfig()
	cfg.SyncPeriod, cfg.MinSyncPeriod = period, 0
	p, err := New(cfg, servicetest.ThisNode, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Tracker().SetService(apiServerService())
	var (
		mu    sync.Mutex
		fulls []SyncResult
	)
	p.OnSync = func(r SyncResult) {
		if r.Full {
			mu.Lock()
			fulls = append(fulls, r)
			mu.Unlock()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*(period+recheck))
	defer cancel()
	p.Run(ctx)

	mu.Lock()
	defer mu.Unlock()
	if len(fulls) < 3 {
		t.Fatalf("%d full syncs in %v, want at least 3 to compare", len(fulls), 10*(period+recheck))
	}
	for i := 1; i < len(fulls); i++ {
		ended := fulls[i-1].Start.Add(fulls[i-1].Duration)
		if idle := fulls[i].Start.Sub(ended); idle < period {
			t.Errorf("full sync %d started %v after the one before ended, want at least the period %v", i, idle, period)
		}
	}
}
