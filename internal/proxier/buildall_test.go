package proxier

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
)

// A cold sync of more Services than ipvsproxy.ParallelBuildMin builds them on every
// core into presized maps; the kernel must end up exactly as when the same
// Services arrive one sync at a time (built one by one, maps grown). Port
// clashes are among them, so the older-wins rule is exercised across the
// workers too. Run with -race, it also checks that building shares nothing.
func TestColdSyncOfManyServicesMatchesOneAtATime(t *testing.T) {
	const n = 3 * ipvsproxy.ParallelBuildMin
	services := make([]*v1.Service, 0, n)
	for i := range n {
		opts := []servicetest.Option{servicetest.CreatedAt(servicetest.Created.Add(time.Duration(i) * time.Second))}
		if i%4 == 0 {
			opts = append(opts, servicetest.NodePort(int32(30000+i)))
		}
		if i%50 == 0 {
			// Every 50th names the same external IP and port: one wins.
			opts = append(opts, func(s *v1.Service) { s.Spec.ExternalIPs = []string{"203.0.113.7"} })
		}
		services = append(services, servicetest.Service(fmt.Sprintf("svc-%d", i), fmt.Sprintf("10.96.%d.%d", i/250, 1+i%250), opts...))
	}
	feed := func(p *Proxier, svc *v1.Service, i int) {
		p.Tracker().SetService(svc)
		p.Tracker().SetEndpointSlice(servicetest.Slice(svc, svc.Name+"-a", 8080,
			fmt.Sprintf("10.244.%d.%d@node2", i/250, 1+i%250), fmt.Sprintf("10.244.%d.%d@node3", 100+i/250, 1+i%250)))
	}

	cold := newFakeKernel()
	p, rec := newTestProxier(t, cold, testConfig())
	for i, svc := range services {
		feed(p, svc, i)
	}
	// And default/kubernetes (newTestProxier).
	if res := mustSync(t, p); res.Services != n+1 {
		t.Fatalf("cold sync built %d Services, want %d", res.Services, n+1)
	}

	oneByOne := newFakeKernel()
	q, _ := newTestProxier(t, oneByOne, testConfig())
	mustSync(t, q)
	for i, svc := range services {
		feed(q, svc, i)
		if res := mustSync(t, q); res.Services != 1 {
			t.Fatalf("sync %d built %d Services, want 1", i, res.Services)
		}
	}

	if a, b := cold.ipvs.Dump(), oneByOne.ipvs.Dump(); a != b {
		t.Errorf("IPVS after a cold sync differs from one Service per sync:\n%s", lineDiff(a, b))
	}
	if a, b := cold.ipset.Dump(), oneByOne.ipset.Dump(); a != b {
		t.Errorf("ipsets after a cold sync differ from one Service per sync:\n%s", lineDiff(a, b))
	}
	if a, b := p.desired.Dump(), q.desired.Dump(); a != b {
		t.Errorf("desired state after a cold sync differs from one Service per sync:\n%s", lineDiff(a, b))
	}
	// The clash is reported: every later claimant of 203.0.113.7:80 lost.
	conflicts := 0
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, ipvsproxy.ReasonPortConflict) {
			conflicts++
		}
	}
	if want := (n+49)/50 - 1; conflicts != want {
		t.Errorf("%d PortConflict events after the cold sync, want %d", conflicts, want)
	}
}

// lineDiff shows the first line where a and b part.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d: %q vs %q (%d and %d lines)", i+1, x, y, len(al), len(bl))
		}
	}
	return "same"
}
