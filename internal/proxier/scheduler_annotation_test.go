package proxier

import (
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
)

func TestSchedulerAnnotation(t *testing.T) {
	node := ipvsproxy.NodeInfo{Name: servicetest.ThisNode}
	cfg := testConfig()
	cfg.AllowedSchedulers = []string{"mh", "sh", "wrr"}
	for _, c := range []struct {
		name        string
		annotations map[string]string
		sched       string
		flags       ipvs.SchedulerFlags
		problem     string
	}{
		{"none: the configured scheduler", nil, "twos", 0, ""},
		{"the configured scheduler, named", map[string]string{ipvsproxy.AnnotationScheduler: "twos"}, "twos", 0, ""},
		{"a stock scheduler not allowed", map[string]string{ipvsproxy.AnnotationScheduler: "lblcr"}, "twos", 0,
			`SchedulerNotAllowed: annotation ipvsproxy.io/scheduler="lblcr": scheduler not allowed here; a Service may choose mh, sh, twos, wrr (those the kernel had when ipvsproxy started on this node, and the configured one); using twos`},
		{"not allowed, with its flags", map[string]string{ipvsproxy.AnnotationScheduler: "lblcr", ipvsproxy.AnnotationSchedulerFlags: "mh-port"}, "twos", 0, `ipvsproxy.io/scheduler="lblcr": scheduler not allowed here`},
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
	cfg := testConfig()
	cfg.AllowedSchedulers = []string{"mh"}
	p, rec := newTestProxier(t, fk, cfg)
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

// A Service cannot make the node load a scheduler module the operator did
// not allow: a stock scheduler outside the list never reaches the kernel
// (the fake records what a virtual server named, as the kernel loads
// ip_vs_<name> for it), the Service is served with the configured
// scheduler and gets a SchedulerNotAllowed Event naming the list, and the
// other Services go on. Any stock name once reached the kernel.
func TestSchedulerNotAllowedLoadsNoModule(t *testing.T) {
	for _, explicit := range []bool{false, true} {
		fk := newFakeKernel()
		cfg := testConfig()
		cfg.AllowedSchedulers, cfg.AllowedSchedulersExplicit = []string{"rr", "wrr"}, explicit
		p, rec := newTestProxier(t, fk, cfg)
		tenant := servicetest.Service("tenant", "10.96.0.30")
		tenant.Annotations = map[string]string{ipvsproxy.AnnotationScheduler: "lblcr"}
		allowed := servicetest.Service("allowed", "10.96.0.31")
		allowed.Annotations = map[string]string{ipvsproxy.AnnotationScheduler: "rr"}
		p.Tracker().SetService(tenant)
		p.Tracker().SetService(allowed)
		mustSync(t, p)
		if loaded := fk.ipvs.LoadedSchedulers(); strings.Join(loaded, ",") != "rr,twos" {
			t.Errorf("explicit=%v: schedulers named to the kernel %v, want rr and twos only", explicit, loaded)
		}
		if dump := fk.ipvs.Dump(); !strings.Contains(dump, "TCP 10.96.0.30:80 twos") || !strings.Contains(dump, "TCP 10.96.0.31:80 rr") {
			t.Errorf("explicit=%v: ipvs:\n%s", explicit, dump)
		}
		source := "those the kernel had when ipvsproxy started on this node"
		if explicit {
			source = "--ipvs-allowed-schedulers"
		}
		if ev := drainEvents(rec); !strings.Contains(ev, `Warning SchedulerNotAllowed annotation ipvsproxy.io/scheduler="lblcr": scheduler not allowed here; a Service may choose rr, twos, wrr (`+source) {
			t.Errorf("explicit=%v: events %q", explicit, ev)
		}
	}
}
