package main

import (
	"encoding/json"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/harness/netns"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	"github.com/ipvsproxy/ipvsproxy/conntrack"
	vnl "github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
)

func TestFlowsAndStaleSet(t *testing.T) {
	for _, n := range []int{2000, 100_000} {
		seen := map[netip.AddrPort]bool{}
		pairs := map[[2]netip.AddrPort]bool{}
		stale := 0
		for i := 0; i < n; i++ {
			f := flowAt(i)
			if seen[f.OrigSrc] {
				t.Fatalf("flow %d reuses client %s", i, f.OrigSrc)
			}
			seen[f.OrigSrc] = true
			if j, ok := flowIndex(f); !ok || j != i {
				t.Fatalf("flowIndex(flowAt(%d)) = %d, %v", i, j, ok)
			}
			if isStale(i) != (f.ReplySrc.Addr() == goneEndpoint) {
				t.Fatalf("flow %d %s: isStale %v but its endpoint is %s", i, f, isStale(i), f.ReplySrc)
			}
			if isStale(i) {
				stale++
			}
			pairs[[2]netip.AddrPort{f.OrigDst, f.ReplySrc}] = true
			for _, a := range []netip.Addr{f.OrigSrc.Addr(), f.OrigDst.Addr(), f.ReplySrc.Addr()} {
				if !documentation(a) {
					t.Fatalf("flow %d uses %s, outside the documentation ranges", i, a)
				}
			}
		}
		if stale != staleCount(n) || stale != n/100 {
			t.Errorf("%d flows: %d stale, staleCount %d, want 1%%", n, stale, staleCount(n))
		}
		if n >= 10_000 && len(pairs) != services*portsPerService*endpointsPerSvc {
			t.Errorf("%d flows reach %d (service port, endpoint) pairs, want every one of %d", n, len(pairs), services*portsPerService*endpointsPerSvc)
		}
	}
	if _, ok := flowIndex(conntrack.Flow{Protocol: conntrack.UDP, OrigSrc: netip.MustParseAddrPort("192.0.2.1:1024")}); ok {
		t.Error("flowIndex accepted a flow flowAt did not make")
	}
}

func documentation(a netip.Addr) bool {
	for _, p := range []string{"192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"} {
		if netip.MustParsePrefix(p).Contains(a) {
			return true
		}
	}
	return false
}

func TestTallyFailsLoudly(t *testing.T) {
	const n = 1000
	fill := func(skip func(i int) bool) *tally {
		tl := newTally(n)
		for i := 0; i < n; i++ {
			if !skip(i) {
				tl.add(flowAt(i))
			}
		}
		return tl
	}
	if err := fill(isStale).check(staleCount(n)); err != nil {
		t.Errorf("exact clean-up rejected: %v", err)
	}
	if err := fill(isStale).check(staleCount(n) - 1); err == nil {
		t.Error("a wrong deleted count passed")
	}
	if err := fill(func(i int) bool { return isStale(i) && i != 0 }).check(staleCount(n)); err == nil {
		t.Error("a stale flow left behind passed")
	}
	if err := fill(func(i int) bool { return isStale(i) || i == 7 }).check(staleCount(n)); err == nil {
		t.Error("a live flow deleted passed")
	}
	tl := fill(isStale)
	tl.add(flowAt(1)) // twice
	if err := tl.check(staleCount(n)); err == nil {
		t.Error("a flow seen twice passed")
	}
	tl = fill(isStale)
	f := flowAt(1)
	f.ReplySrc = netip.MustParseAddrPort("203.0.113.200:5353")
	tl.add(f)
	if err := tl.check(staleCount(n)); err == nil {
		t.Error("a foreign flow passed")
	}
}

// Without root: each side's decision, on fakes holding the same flows;
// ours is ipvsproxy's Proxier on the conntrack Fake, both operations twice,
// each run checked by runOps as on the real table.
func TestBothSidesChooseTheStaleFlows(t *testing.T) {
	const n = 20_000
	t.Run("ours", func(t *testing.T) {
		fake := conntrack.NewFake()
		for i := 0; i < n; i++ {
			if err := fake.AddFlow(flowAt(i)); err != nil {
				t.Fatal(err)
			}
		}
		ops, err := oursOps(fake, fake.AddFlow, n)
		if err != nil {
			t.Fatal(err)
		}
		res, err := runOps(sideOurs, ops, fake, n, 2, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 2 || res[0].Op != opChange || res[1].Op != opPeriodic {
			t.Fatalf("ops %+v, want change then periodic", res)
		}
		for _, o := range res {
			if !slices.Equal(o.Deleted, []int{staleCount(n), staleCount(n)}) || len(o.PassMillis) != 2 {
				t.Errorf("%s: deleted %v, passes %v; want the %d stale flows twice, each with its pass time", o.Op, o.Deleted, o.PassMillis, staleCount(n))
			}
		}
	})
	t.Run("kube-proxy", func(t *testing.T) {
		fake := &kubeProxyFake{}
		for i := 0; i < n; i++ {
			fake.entries = append(fake.entries, toNetlink(flowAt(i)))
		}
		clean, err := kubeProxyCleaner(fake)
		if err != nil {
			t.Fatal(err)
		}
		deleted, err := clean()
		if err != nil {
			t.Fatal(err)
		}
		if deleted != staleCount(n) || len(fake.deleted) != staleCount(n) {
			t.Fatalf("kube-proxy deleted %d (asked for %d), want %d", deleted, len(fake.deleted), staleCount(n))
		}
		for _, f := range fake.deleted {
			if f.Reverse.SrcIP.String() != goneEndpoint.String() {
				t.Fatalf("kube-proxy deleted a live flow %v", f)
			}
		}
	})
}

// runOps fails an operation that deletes a live flow, leaves a stale one
// or miscounts, whatever the operation says.
func TestRunOpsChecksTheTable(t *testing.T) {
	const n = 1000
	for name, run := range map[string]func(*conntrack.Fake) (int, error){
		"a live flow too": func(f *conntrack.Fake) (int, error) {
			return f.DeleteFlowsMatching(4, conntrack.UDP, func(fl conntrack.Flow) bool {
				i, _ := flowIndex(fl)
				return isStale(i) || i == 1
			})
		},
		"a stale flow left": func(f *conntrack.Fake) (int, error) {
			n, err := f.DeleteFlowsMatching(4, conntrack.UDP, func(fl conntrack.Flow) bool { i, _ := flowIndex(fl); return isStale(i) && i != 0 })
			return n + 1, err
		},
		"miscounted": func(f *conntrack.Fake) (int, error) {
			n, err := f.DeleteFlowsMatching(4, conntrack.UDP, func(fl conntrack.Flow) bool { i, _ := flowIndex(fl); return isStale(i) })
			return n - 1, err
		},
	} {
		fake := conntrack.NewFake()
		for i := 0; i < n; i++ {
			if err := fake.AddFlow(flowAt(i)); err != nil {
				t.Fatal(err)
			}
		}
		o := op{name: name, prepare: func(int) error { return nil }, run: func() (ran, error) {
			d, err := run(fake)
			return ran{Deleted: d}, err
		}}
		if _, err := runOps(sideOurs, []op{o}, fake, n, 1, io.Discard); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}

func TestMarkdown(t *testing.T) {
	all := []result{
		{Side: sideOurs, Flows: 1000, Ops: []opResult{
			{Op: opChange, Millis: []float64{2}, PassMillis: []float64{1}, Deleted: []int{10}, Filters: []int{8}, DistinctFilters: []int{4}},
			{Op: opPeriodic, Millis: []float64{4}, PassMillis: []float64{2}, Deleted: []int{10}, Filters: []int{0}, DistinctFilters: []int{0}}}},
		{Side: sideKubeProxy, Flows: 1000, Ops: []opResult{{Op: opCleanStale, Millis: []float64{8}, Deleted: []int{10}}}},
	}
	md := markdown(all)
	for _, want := range []string{
		"| ours | change | 1000 | 1 × 1 | 2.0 | 2.0 | 4.00 | 1.0 | 8.00 | 10 | 8 (4) |",
		"| ours | periodic | 1000 | 1 × 1 | 4.0 | 4.0 | 2.00 | 2.0 | 4.00 | 10 | 0 (0) |",
		"| kube-proxy | CleanStaleEntries | 1000 | 1 × 1 | 8.0 | 8.0 | 1.00 | – | – | 10 | – |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
}

// kubeProxyFake is kube-proxy's conntrack Interface over a list (its own
// fake cannot be filled from outside its package).
type kubeProxyFake struct {
	entries, deleted []*vnl.ConntrackFlow
}

func (f *kubeProxyFake) ListEntries(uint8) ([]*vnl.ConntrackFlow, error) { return f.entries, nil }

func (f *kubeProxyFake) DeleteEntries(_ uint8, flows []*vnl.ConntrackFlow) (int, error) {
	f.deleted = append(f.deleted, flows...)
	return len(flows), nil
}

func toNetlink(f conntrack.Flow) *vnl.ConntrackFlow {
	tuple := func(src, dst netip.AddrPort) vnl.IPTuple {
		return vnl.IPTuple{Protocol: f.Protocol, SrcIP: net.IP(src.Addr().AsSlice()), SrcPort: src.Port(),
			DstIP: net.IP(dst.Addr().AsSlice()), DstPort: dst.Port()}
	}
	return &vnl.ConntrackFlow{FamilyType: unix.AF_INET, Forward: tuple(f.OrigSrc, f.OrigDst), Reverse: tuple(f.ReplySrc, f.ReplyDst)}
}

func TestPercentile(t *testing.T) {
	v := []float64{5, 1, 3}
	if p := percentile(v, 50); p != 3 {
		t.Errorf("p50 = %v", p)
	}
	if p := percentile(v, 99); p != 5 {
		t.Errorf("p99 = %v", p)
	}
}

// As root: both sides on the real kernel (ours: both operations), each in a namespace of its own
// (this test binary re-run under `unshare --net`), 2,000 flows.
func TestRealKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.NotRoot, "needs root to create network namespaces")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		kerneltest.Skip(t, kerneltest.NoTool, "no unshare")
	}
	if out, err := exec.Command("unshare", "--net", "true").CombinedOutput(); err != nil {
		kerneltest.Skip(t, kerneltest.NoKernelFeature, "cannot create a network namespace: %v %s", err, out)
	}
	for _, side := range []string{sideOurs, sideKubeProxy} {
		t.Run(side, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "result.json")
			cmd := exec.Command("unshare", "--net", "--", os.Args[0], "-test.run=^TestSideProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), "IPVSPROXY_BENCH_NETNS=private", "CONNTRACK_BENCH_SIDE="+side, "CONNTRACK_BENCH_OUT="+out)
			if b, err := cmd.CombinedOutput(); err != nil {
				if strings.Contains(string(b), "conntrack netlink") && strings.Contains(string(b), "not supported") {
					kerneltest.Skip(t, kerneltest.NoKernelFeature, "no ctnetlink: %s", b)
				}
				t.Fatalf("%v\n%s", err, b)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			var r result
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			want := []string{opCleanStale}
			if side == sideOurs {
				want = []string{opChange, opPeriodic}
			}
			if r.Side != side || len(r.Ops) != len(want) {
				t.Fatalf("result %+v: want the operations %v", r, want)
			}
			for i, o := range r.Ops {
				if o.Op != want[i] || !slices.Equal(o.Deleted, []int{20, 20}) {
					t.Errorf("%s %s: deleted %v, want 2 runs of %s each deleting the 20 stale flows", side, o.Op, o.Deleted, want[i])
				}
			}
		})
	}
}

// TestSideProcess is TestRealKernel's child, in its fresh namespace.
func TestSideProcess(t *testing.T) {
	side := os.Getenv("CONNTRACK_BENCH_SIDE")
	if side == "" {
		t.Skip("run by TestRealKernel")
	}
	if err := netns.Prepare(shape.NodeIP, ""); err != nil {
		t.Fatal(err)
	}
	res, err := runSide(side, 2000, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	if err := os.WriteFile(os.Getenv("CONNTRACK_BENCH_OUT"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
