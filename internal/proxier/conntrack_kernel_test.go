package proxier

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	v1 "k8s.io/api/core/v1"
)

// The proxier's conntrack reconcile against a real conntrack table (in a
// fresh network namespace, flows injected with `conntrack -I`), the rest of
// the kernel faked: a restart over a flow to a vanished endpoint deletes
// exactly that flow.
func TestConntrackReconcileOnRealTable(t *testing.T) {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.NotRoot, "needs root for a network namespace")
	}
	if _, err := exec.LookPath("conntrack"); err != nil {
		kerneltest.Skip(t, kerneltest.NoTool, "needs the conntrack tool to inject flows")
	}
	ns, path := netnstest.NewNamed(t, "ipvsproxy-ctr-")
	table, err := conntrack.NewInNamespace(int(ns))
	if errors.Is(err, conntrack.ErrUnsupported) {
		kerneltest.Skip(t, kerneltest.NoKernelFeature, "no conntrack netlink: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer table.Close()
	inject := func(src, sport, dst, dport, replySrc, replySport string) {
		t.Helper()
		out, err := exec.Command("ip", "netns", "exec", filepath.Base(path), "conntrack", "-I", "-p", "udp",
			"-s", src, "--sport", sport, "-d", dst, "--dport", dport,
			"-r", replySrc, "--reply-port-src", replySport, "-q", src, "--reply-port-dst", sport, "-t", "600").CombinedOutput()
		if err != nil {
			t.Fatalf("conntrack -I: %v\n%s", err, out)
		}
	}
	// live: to a real server; stale: to an endpoint that went away while
	// the daemon was down; other: to an address no Service has.
	inject("10.244.3.8", "40000", "10.96.0.53", "80", "10.244.1.5", "53")
	inject("10.244.3.9", "40000", "10.96.0.53", "80", "10.244.2.7", "53")
	inject("10.244.3.10", "40000", "192.0.2.100", "53", "192.0.2.100", "53")

	fk := newFakeKernel()
	k := fk.kernel()
	k.Conntrack = table
	p, err := New(testConfig(), servicetest.ThisNode, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := servicetest.Service("dns", "10.96.0.53", servicetest.Protocol(v1.ProtocolUDP))
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "dns-a", 53, "10.244.1.5@node1"))
	res := mustSync(t, p)
	left, err := table.Flows(4)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range left {
		got = append(got, f.String())
	}
	want := []string{
		"udp 10.244.3.10:40000 -> 192.0.2.100:53 reply 192.0.2.100:53 -> 10.244.3.10:40000",
		"udp 10.244.3.8:40000 -> 10.96.0.53:80 reply 10.244.1.5:53 -> 10.244.3.8:40000",
	}
	if res.ConntrackDeleted != 1 || len(got) != 2 || !strings.Contains(strings.Join(got, "\n"), want[0]) || !strings.Contains(strings.Join(got, "\n"), want[1]) {
		t.Fatalf("deleted %d, left\n%s\nwant 1 deleted, left\n%s", res.ConntrackDeleted, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
