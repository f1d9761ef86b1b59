package proxier

import (
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
)

func TestSchedulerAnnotation(t *testing.T) {
	node := ipvsproxy.NodeInfo{Name: servicetest.ThisNode}
	cfg := testConfig()
	for _, c := range []struct {
		name        string
		annotations map[string]string
		sched       string
		flags       ipvs.SchedulerFlags
		problem     string
	}{
		{"none: the configured scheduler", nil, "twos", 0, ""},
		{"mh with flags", map[string]string{ipvsproxy.AnnotationScheduler: "mh", ipvsproxy.AnnotationSchedulerFlags: "mh-port,mh-fallback"}, "mh", ipvs.SchedulerFlag1 | ipvs.SchedulerFlag2, ""},
		{"sh without flags", map[string]string{ipvsproxy.AnnotationScheduler: "sh"}, "sh", 0, ""},
		{"unknown scheduler", map[string]string{ipvsproxy.AnnotationScheduler: "fastest"}, "twos", 0, `ipvsproxy.io/scheduler="fastest" is not an IPVS scheduler`},
		{"flags of another scheduler", map[string]string{ipvsproxy.AnnotationScheduler: "mh", ipvsproxy.AnnotationSchedulerFlags: "sh-port"}, "twos", 0, "scheduler mh takes mh-fallback, mh-port"},
		{"flags without a scheduler that has them", map[string]string{ipvsproxy.AnnotationSchedulerFlags: "mh-port"}, "twos", 0, "scheduler twos takes no flags"},
	} {
		t.Run(c.name, func(t *testing.T) {
			svc := servicetest.Service("web", "10.96.0.10")
			svc.Annotations = c.annotations
			st := ipvsproxy.BuildService(svc, nil, node, cfg)
			if len(st.VirtualServers) != 1 {
				t.Fatalf("virtual servers: %+v", st.VirtualServers)
			}
			vs := st.VirtualServers[0]
			if vs.Scheduler != c.sched || vs.SchedulerFlags != c.flags {
				t.Errorf("scheduler %s flags %v, want %s %v", vs.Scheduler, vs.SchedulerFlags, c.sched, c.flags)
			}
			var problems []string
			for _, p := range st.Problems {
				problems = append(problems, p.String())
			}
			got := strings.Join(problems, "; ")
			if (c.problem == "") != (got == "") || !strings.Contains(got, c.problem) {
				t.Errorf("problems %q, want one containing %q", got, c.problem)
			}
		})
	}
}

// The annotated scheduler goes through the sync to the kernel's table, and
// a refused annotation leaves other Services alone.
func TestSchedulerAnnotationThroughSync(t *testing.T) {
	fk := newFakeKernel()
	p, rec := newTestProxier(t, fk, testConfig())
	good := servicetest.Service("hashed", "10.96.0.20")
	good.Annotations = map[string]string{ipvsproxy.AnnotationScheduler: "mh", ipvsproxy.AnnotationSchedulerFlags: "mh-port"}
	bad := servicetest.Service("typo", "10.96.0.21")
	bad.Annotations = map[string]string{ipvsproxy.AnnotationScheduler: "mhh"}
	p.Tracker().SetService(good)
	p.Tracker().SetService(bad)
	mustSync(t, p)
	dump := fk.ipvs.Dump()
	if !strings.Contains(dump, "TCP 10.96.0.20:80 mh flags mh-port") || !strings.Contains(dump, "TCP 10.96.0.21:80 twos") {
		t.Errorf("ipvs:\n%s", dump)
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, "InvalidService") || !strings.Contains(e, "mhh") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no Event for the refused annotation")
	}
}
