package proxier

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
)

func TestStatusKeepsWhenAWriteStartedFailing(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	clock := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return clock }
	// The kernel lacks the scheduler: every sync fails to add the virtual server.
	fk.ipvs.RemoveScheduler("twos")
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1"))
	// web and default/kubernetes (newTestProxier).
	if st := p.Status(); st.ServiceChangesQueued != 2 || st.EndpointChangesQueued != 1 || !st.NextSyncFull {
		t.Fatalf("before the first sync: %+v, want 2 service and 1 endpoint changes queued, next sync full", st)
	}
	first := clock
	p.Sync()
	clock = clock.Add(time.Minute)
	p.Sync()
	st := p.Status()
	if len(st.FailedWrites) != 1 {
		t.Fatalf("failed writes %+v, want the one virtual server", st.FailedWrites)
	}
	fw := st.FailedWrites[0]
	if fw.Object != "ipvs" || !strings.Contains(fw.Error, "TCP 10.96.0.10:80") || !fw.Since.Equal(first) || !fw.LastAttempt.Equal(clock) {
		t.Fatalf("failed write %+v, want ipvs TCP 10.96.0.10:80 since %v, last attempt %v", fw, first, clock)
	}
	// A failing object is retried on its own in partial syncs:
	// the sync after the failure is partial, and so is the next one.
	if !st.LastFullSync.Equal(first) || !st.LastPartialSync.Equal(clock) || st.NextSyncFull || st.ServiceChangesQueued != 0 {
		t.Fatalf("status %+v, want last full sync %v, last partial %v, next sync partial, nothing queued", st, first, clock)
	}
	// inspect shows the reconciler's status of that object: in error since
	// the first attempt, with its next retry.
	if len(st.Objects) != 1 || st.Objects[0].State != snapshot.StateError || !st.Objects[0].Since.Equal(first) ||
		!st.Objects[0].NextRetry.After(clock) || !slices.Equal(st.Objects[0].Services, []string{"default/web"}) {
		t.Fatalf("objects %+v, want the virtual server in error since %v, retried after %v, for default/web", st.Objects, first, clock)
	}
	// The scheduler comes back: the repair clears the failure.
	fk.ipvs.SetSchedulers("twos", "wrr")
	clock = clock.Add(time.Minute)
	p.Sync()
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1", "10.244.2.7@node2"))
	clock = clock.Add(time.Minute)
	p.Sync()
	st = p.Status()
	if len(st.FailedWrites) != 0 || st.NextSyncFull || !st.LastPartialSync.Equal(clock) || !st.LastFullSync.Equal(first) {
		t.Fatalf("after the repair: %+v", st)
	}
	// The JSON the daemon serves names every field, with empty lists not null.
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"failedWrites":[]`, `"objects":[]`, `"lastFullSync":"2026-03-01T10:00:00Z"`, `"nextSyncFull":false`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("status JSON %s lacks %s", b, want)
		}
	}
}

func TestSnapshotNamesEveryVirtualServerWithItsEndpoints(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	svc := servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080))
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.1.5@node1", "10.244.2.7@node2/terminating", "10.244.2.8@node2/notready"))
	mustSync(t, p)
	s := p.Snapshot()
	if s.Node.Name != servicetest.ThisNode || len(s.VirtualServers) != 2 {
		t.Fatalf("snapshot node %+v, virtual servers %+v: want node1 with the cluster IP and the node port", s.Node, s.VirtualServers)
	}
	for _, vs := range s.VirtualServers {
		var got []string
		for _, rs := range vs.RealServers {
			got = append(got, rs.RealServerKey.String()+" "+rs.NodeName+" "+rs.Condition)
		}
		// Ready endpoints only: the terminating one serves only when none is ready.
		if vs.ServicePort() != "default/web:http" || strings.Join(got, ",") != "10.244.1.5:8080 node1 ready" {
			t.Errorf("%s %s: %s real servers %v", vs.Kind, vs.VirtualServerKey, vs.ServicePort(), got)
		}
	}
	// Only the terminating endpoint is left: it serves, and says so.
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "web-a", 8080, "10.244.2.7@node2/terminating"))
	mustSync(t, p)
	s = p.Snapshot()
	if rs := s.VirtualServers[0].RealServers; len(rs) != 1 || rs[0].Condition != snapshot.ConditionServingTerminating {
		t.Fatalf("real servers %+v, want one serving-terminating", rs)
	}
	if len(s.Services) != 2 || s.Services[0].Name != APIServerService.String() || s.Services[1].Name != "default/web" {
		t.Fatalf("services %+v", s.Services)
	}
}
