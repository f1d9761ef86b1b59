package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// runInspect runs `ipvsproxy ARGS...` and returns its exit code and output.
func runInspect(t *testing.T, args ...string) (int, string) {
	t.Helper()
	code := 0
	var out bytes.Buffer
	exiter, errWriter := cli.OsExiter, cli.ErrWriter
	cli.OsExiter, cli.ErrWriter = func(c int) { code = c }, &out
	defer func() { cli.OsExiter, cli.ErrWriter = exiter, errWriter }()
	app := newApp()
	app.Writer, app.ErrWriter = &out, &out
	if err := app.Run(append([]string{"ipvsproxy"}, args...)); err != nil && code == 0 {
		code = 1
		out.WriteString(err.Error())
	}
	return code, out.String()
}

func TestInspectCheckWithoutDaemonExitsTwoAndSaysWhy(t *testing.T) {
	// Port 1 on loopback: nothing listens, the daemon is not reachable.
	code, out := runInspect(t, "inspect", "--check", "--daemon", "127.0.0.1:1")
	if code != 2 || !strings.Contains(out, "daemon is not reachable at http://127.0.0.1:1/inspect/v1/snapshot") {
		t.Fatalf("inspect --check without a daemon: exit %d, %q; want 2 and the reason", code, out)
	}
}

func TestInspectRefusesBadInputInASentence(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", "-o", "xml"}, `unknown output format "xml": use table, json or yaml`},
		{[]string{"inspect", "trace", "10.0.0.1"}, "usage: ipvsproxy inspect trace SRC DST:PORT[/PROTO]"},
		{[]string{"inspect", "trace", "10.0.0.1", "10.96.0.10:80/icmp"}, `protocol "icmp" is not tcp, udp or sctp`},
	} {
		code, out := runInspect(t, c.args...)
		if code == 0 || !strings.Contains(out, c.want) {
			t.Errorf("ipvsproxy %s: exit %d, %q; want an error %q", strings.Join(c.args, " "), code, out, c.want)
		}
	}
}
