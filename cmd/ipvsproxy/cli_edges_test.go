package main

import (
	"errors"
	"strings"
	"testing"
)

func TestCLIEdges(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		// The flags after a positional argument would be ignored.
		{[]string{"foo", "--ipvs-scheduler=rr"}, `unexpected argument "foo"`},
		{[]string{"--ipvs-sync-period=30"}, "--ipvs-sync-period=30: a duration needs a unit, use 30s"},
		{[]string{"--ipvs-sync-period=soon"}, "--ipvs-sync-period=soon: not a duration"},
	} {
		app := newApp()
		var out strings.Builder
		app.Writer, app.ErrWriter = &out, &out
		// Both fail before runAction would touch anything.
		err := app.Run(append([]string{"ipvsproxy", "run"}, c.args...))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.args, err, c.want)
		}
	}
	if got := explainError(errors.New(`time: missing unit in duration "30"`)).Error(); !strings.Contains(got, "use 30s") {
		t.Errorf("env duration: %s", got)
	}
}

func TestCleanupShowsOnlyTheFlagsItReads(t *testing.T) {
	for _, cmd := range newApp().Commands {
		if cmd.Name != "cleanup" {
			continue
		}
		var names []string
		for _, f := range cmd.Flags {
			names = append(names, f.Names()[0])
		}
		for _, unread := range []string{"cluster-cidr", "nodeport-addresses", "masquerade-all", "ipvs-scheduler", "ipvs-strict-arp", "ip-families"} {
			for _, n := range names {
				if n == unread {
					t.Errorf("cleanup shows --%s, which it does not read", n)
				}
			}
		}
		if len(names) != 9 { // with the node lock's two
			t.Errorf("cleanup flags %v", names)
		}
	}
}

func TestSchedulerFlagsFlag(t *testing.T) {
	cfg, err := parse(t, "--ipvs-scheduler=mh", "--ipvs-scheduler-flags=mh-port,mh-fallback")
	if err != nil || cfg.SchedulerFlags.For("mh") != "mh-fallback,mh-port" {
		t.Errorf("mh flags: %v %v", cfg.SchedulerFlags, err)
	}
	if _, err := parse(t, "--ipvs-scheduler=rr", "--ipvs-scheduler-flags=mh-port"); err == nil || !strings.Contains(err.Error(), "--ipvs-scheduler-flags") {
		t.Errorf("flags for rr: %v", err)
	}
}
