package main

import (
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/healthcheck"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/ipvsproxy/ipvsproxy/metrics"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

// Health says whether the sync loop is alive and keeping up, not whether
// every object was written (issue 8 item 1): a completed sync with one
// failing object keeps /healthz at 200; a sync that could not even read the
// kernel does not count.
func TestHealthFollowsTheSyncLoopNotEveryObject(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	period := 30 * time.Second
	health := healthcheck.NewProxyHealth(period, clock)
	health.SetIPFamilies(v1.IPv4Protocol)
	services := healthcheck.NewServiceHealthServer(nil, record.NewFakeRecorder(10), health)
	defer services.Close()
	m := metrics.New()
	families := []v1.IPFamily{v1.IPv4Protocol}
	failing := ipvsproxy.SyncResult{Completed: true, WriteErrors: map[string]int{"ipset": 1}, FailingObjects: map[string]int{"ipset": 1}}
	for i := 0; i < 4; i++ {
		health.QueuedUpdate()
		clock.Step(period)
		observeSync(m, health, services, families, failing)
	}
	if !health.Healthy() {
		t.Fatal("a live sync loop with one failing object is reported unhealthy")
	}
	health.QueuedUpdate()
	for i := 0; i < 4; i++ {
		clock.Step(period)
		observeSync(m, health, services, families, ipvsproxy.SyncResult{WriteErrors: map[string]int{"read": 1}})
	}
	if health.Healthy() {
		t.Fatal("a loop that cannot read the kernel for two minutes is reported healthy")
	}
}
