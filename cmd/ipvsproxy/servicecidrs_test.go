package main

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/healthcheck"
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/kubeapi/kubeapitest"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
)

// fastDiscovery makes discovery retries and the first sync's grace short
// for one test.
func fastDiscovery(t *testing.T, grace time.Duration) {
	backoff, oldGrace := serviceCIDRDiscovery, serviceCIDRGrace
	serviceCIDRDiscovery = wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 3, Cap: 50 * time.Millisecond}
	serviceCIDRGrace = grace
	t.Cleanup(func() { serviceCIDRDiscovery, serviceCIDRGrace = backoff, oldGrace })
}

// failDiscovery makes the fake API server's discovery answer 503, as one
// restarting does, to each request for which fail (given the request's
// number, from 1) says so; calls counts them.
func failDiscovery(client interface {
	PrependReactor(string, string, k8stesting.ReactionFunc)
}, fail func(call int64) bool, calls *atomic.Int64) {
	client.PrependReactor("get", "resource", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fail(calls.Add(1)) {
			return true, nil, apierrors.NewServiceUnavailable("the API server is restarting")
		}
		return false, nil, nil
	})
}

func testAccess() *apiAccess {
	return newAPIAccess(healthcheck.NewProxyHealth(time.Minute, clock.RealClock{}), nil, nil, "node1")
}

// Discovery that fails at start (an API server restarting) is retried with
// backoff until it answers; the ServiceCIDR informer then feeds the tracker.
// Tried once, the process stayed without it for life.
func TestServiceCIDRDiscoveryRetriedUntilServed(t *testing.T) {
	fastDiscovery(t, time.Minute)
	client := fakeCluster()
	var calls atomic.Int64
	failDiscovery(client, func(call int64) bool { return call <= 3 }, &calls)
	tracker := ipvsproxy.NewChangeTracker("node1", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	synced := watchServiceCIDRs(ctx, kubeapitest.FromClientset(client), tracker, testAccess())
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return synced() && len(tracker.ServiceCIDRRanges()) > 0, nil
	}); err != nil {
		t.Fatalf("after %d discovery calls: synced %v, ranges %v", calls.Load(), synced(), tracker.ServiceCIDRRanges())
	}
	if got := tracker.ServiceCIDRRanges(); len(got) != 1 || got[0].String() != "10.96.0.0/16" {
		t.Errorf("ranges %v, want [10.96.0.0/16]", got)
	}
	if got := calls.Load(); got != 4 {
		t.Errorf("%d discovery calls, want 4 (3 failed, then the answer)", got)
	}
}

// Discovery that keeps failing holds the first sync for serviceCIDRGrace at
// most (proxying goes on without ServiceCIDRs), and is still retried: the
// ranges come when it answers.
func TestServiceCIDRDiscoveryFailingDoesNotHoldTheFirstSync(t *testing.T) {
	fastDiscovery(t, 200*time.Millisecond)
	client := fakeCluster()
	var calls atomic.Int64
	var answering atomic.Bool
	failDiscovery(client, func(int64) bool { return !answering.Load() }, &calls)
	tracker := ipvsproxy.NewChangeTracker("node1", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	synced := watchServiceCIDRs(ctx, kubeapitest.FromClientset(client), tracker, testAccess())
	if synced() {
		t.Fatal("synced before discovery answered or the grace passed")
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return synced(), nil
	}); err != nil {
		t.Fatal("the first sync is held by failing discovery past its grace")
	}
	if waited := time.Since(start); waited < serviceCIDRGrace {
		t.Errorf("synced after %v, before the grace of %v", waited, serviceCIDRGrace)
	}
	before := calls.Load()
	answering.Store(true)
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(tracker.ServiceCIDRRanges()) > 0, nil
	}); err != nil {
		t.Fatalf("no ranges after discovery answered (%d failed calls before)", before)
	}
}

// An API server without ServiceCIDRs (404 on the group version, or the
// resource not listed) settles at once, with no informer and no retry.
func TestServiceCIDRsNotServedSettleAtOnce(t *testing.T) {
	fastDiscovery(t, time.Minute)
	for name, resources := range map[string]bool{"group version missing": false, "resource not listed": true} {
		t.Run(name, func(t *testing.T) {
			client := fakeCluster()
			client.Resources[0].APIResources = nil
			if !resources {
				client.Resources = nil
			}
			var calls atomic.Int64
			failDiscovery(client, func(int64) bool { return false }, &calls)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			synced := watchServiceCIDRs(ctx, kubeapitest.FromClientset(client), ipvsproxy.NewChangeTracker("node1", nil), testAccess())
			if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
				return synced(), nil
			}); err != nil {
				t.Fatal("not settled")
			}
			time.Sleep(100 * time.Millisecond)
			if got := calls.Load(); got != 1 {
				t.Errorf("%d discovery calls, want 1", got)
			}
			if slices.ContainsFunc(client.Actions(), func(a k8stesting.Action) bool { return a.GetResource().Resource == "servicecidrs" }) {
				t.Error("listed ServiceCIDRs the API server does not serve")
			}
		})
	}
}
