package conntrack

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
	ct "github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"
)

// newBareTable opens the conntrack table of a fresh, empty network
// namespace (no interface, no rule), for flows injected over netlink. It
// skips unless root.
func newBareTable(tb testing.TB) *Table {
	tb.Helper()
	if os.Geteuid() != 0 {
		kerneltest.Skip(tb, kerneltest.NotRoot, "real conntrack tests need root to create network namespaces")
	}
	// Anonymous: `ip netns add` here raced the named namespaces of tests
	// running at the same time in other packages (netnstest.NewNamed).
	h := netnstest.New(tb)
	tbl, err := NewInNamespace(int(h))
	if errors.Is(err, ErrUnsupported) {
		kerneltest.Skip(tb, kerneltest.NoKernelFeature, "kernel has no conntrack netlink: %v", err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { tbl.Close() })
	return tbl
}

// inject creates flow in the kernel's table as ctnetlink does for
// `conntrack -I`: both tuples as given (a reply source other than the
// original destination is how a DNATed flow looks), ten minutes to live.
func (t *Table) inject(flow Flow) error {
	tuple := func(src, dst netip.AddrPort) ct.Tuple {
		return ct.Tuple{
			IP:    ct.IPTuple{SourceAddress: src.Addr(), DestinationAddress: dst.Addr()},
			Proto: ct.ProtoTuple{Protocol: flow.Protocol, SourcePort: src.Port(), DestinationPort: dst.Port()},
		}
	}
	err := t.conn.Create(ct.Flow{
		TupleOrig:  tuple(flow.OrigSrc, flow.OrigDst),
		TupleReply: tuple(flow.ReplySrc, flow.ReplyDst),
		// Hours: injecting a million flows takes minutes under emulation.
		Timeout: 3 * 3600,
	})
	if err != nil {
		return fmt.Errorf("inject conntrack flow %s: %w", flow, err)
	}
	return nil
}

// streamBackends are the Fake and a bare kernel table, both holding flows.
func streamBackends(t *testing.T, flows []Flow) map[string]Interface {
	fake := NewFake()
	kernel := newBareTable(t)
	for _, f := range flows {
		if err := fake.AddFlow(f); err != nil {
			t.Fatal(err)
		}
		if err := kernel.inject(f); err != nil {
			t.Fatal(err)
		}
	}
	return map[string]Interface{"fake": fake, "kernel": kernel}
}

func TestDeleteFlowsMatching(t *testing.T) {
	tcp := Flow{Protocol: TCP, OrigSrc: netip.MustParseAddrPort("192.0.2.1:40010"), OrigDst: netip.MustParseAddrPort("198.51.100.10:80"),
		ReplySrc: netip.MustParseAddrPort("192.0.2.9:8080"), ReplyDst: netip.MustParseAddrPort("192.0.2.1:40010")}
	flows := []Flow{labFlows["a"], labFlows["b"], labFlows["c"], labFlows["v6"], tcp}
	for name, tbl := range streamBackends(t, flows) {
		t.Run(name, func(t *testing.T) {
			// Only the family and protocol asked for reach the predicate.
			var seen []Flow
			n, err := tbl.DeleteFlowsMatching(4, UDP, func(f Flow) bool {
				seen = append(seen, f)
				return f.ReplySrc.Port() == 8080
			})
			if err != nil || n != 2 {
				t.Fatalf("DeleteFlowsMatching(4, UDP, reply port 8080) = %d, %v; want 2", n, err)
			}
			if len(seen) != 3 {
				t.Errorf("predicate saw %v, want the three IPv4 UDP flows", seen)
			}
			left4, _ := tbl.Flows(4)
			if want := []Flow{labFlows["c"], tcp}; !sameFlows(left4, want) {
				t.Errorf("IPv4 flows left %v, want %v", left4, want)
			}
			if n, err := tbl.DeleteFlowsMatching(6, UDP, func(Flow) bool { return true }); err != nil || n != 1 {
				t.Errorf("DeleteFlowsMatching(6, UDP, all) = %d, %v; want 1", n, err)
			}
			if n, err := tbl.DeleteFlowsMatching(4, 0, func(f Flow) bool { return f.Protocol == TCP }); err != nil || n != 1 {
				t.Errorf("DeleteFlowsMatching(4, any, TCP) = %d, %v; want 1", n, err)
			}
			if _, err := tbl.DeleteFlowsMatching(5, UDP, func(Flow) bool { return true }); err == nil {
				t.Error("family 5 accepted")
			}
		})
	}
}

// The protocol filter is applied by the kernel (CTA_FILTER), so a clean-up
// of UDP flows does not even receive the TCP ones.
func TestDumpFiltersProtocolInKernel(t *testing.T) {
	tbl := newBareTable(t)
	for i := 0; i < 100; i++ {
		f := Flow{Protocol: TCP, OrigSrc: netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), uint16(20000+i)),
			OrigDst: netip.MustParseAddrPort("198.51.100.10:80"), ReplySrc: netip.MustParseAddrPort("198.51.100.10:80"),
			ReplyDst: netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), uint16(20000+i))}
		if err := tbl.inject(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := tbl.inject(labFlows["a"]); err != nil {
		t.Fatal(err)
	}
	count := func(protocol uint8) int {
		n := 0
		if err := streamFlows(tbl.dump, unix.AF_INET, protocol, func(b []kernelFlow) error { n += len(b); return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := count(0); got != 101 {
		t.Errorf("unfiltered dump = %d flows, want 101", got)
	}
	if got := count(UDP); got != 1 {
		t.Errorf("UDP dump = %d flows, want 1: the kernel did not filter", got)
	}
}

func sameFlows(a, b []Flow) bool {
	key := func(list []Flow) map[Flow]bool {
		m := map[Flow]bool{}
		for _, f := range list {
			// The kernel's timeout counts down and its state is the
			// kernel's to say; these tests are about which flows remain.
			f.Timeout, f.State = 0, ""
			m[f] = true
		}
		return m
	}
	return len(a) == len(b) && reflect.DeepEqual(key(a), key(b))
}

// benchmarkFlows is how many flows the clean-up benchmark holds by default.
// A network namespace holds at most the init namespace's nf_conntrack_max
// (262,144 on this host; the sysctl is read-only inside a namespace).
// IPVSPROXY_CONNTRACK_BENCH_FLOWS=N asks for N flows and raises
// nf_conntrack_max (and the hash's buckets) to fit: meant for the VM, whose
// kernel is ours to change (`make bench-conntrack-vm`), never this host.
const benchmarkFlows = 250_000

// cleanUpFlows is the flow count of this run (see benchmarkFlows).
func cleanUpFlows(b *testing.B) int {
	v := os.Getenv("IPVSPROXY_CONNTRACK_BENCH_FLOWS")
	if v == "" {
		return benchmarkFlows
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 100 {
		b.Fatalf("IPVSPROXY_CONNTRACK_BENCH_FLOWS=%q: want a flow count of at least 100", v)
	}
	for file, value := range map[string]int{"nf_conntrack_max": n + n/10, "nf_conntrack_buckets": n / 4} {
		path := "/proc/sys/net/netfilter/" + file
		if cur, err := os.ReadFile(path); err == nil {
			if have, _ := strconv.Atoi(strings.TrimSpace(string(cur))); have >= value {
				continue
			}
		}
		if err := os.WriteFile(path, []byte(strconv.Itoa(value)), 0o644); err != nil {
			b.Fatalf("raise %s to %d for %d flows: %v", file, value, n, err)
		}
	}
	return n
}

// BenchmarkCleanUp measures one clean-up of a kernel table of
// benchmarkFlows UDP flows to 1,000 service ports, 1% of them stale:
// "stream" is DeleteFlowsMatching (what the proxier runs), "whole-table"
// the former way, ti-mo/conntrack's Dump of the whole table first. Besides
// time it reports the peak of live heap during the clean-up (peak-heap-MiB).
func BenchmarkCleanUp(b *testing.B) {
	benchmarkFlows := cleanUpFlows(b)
	tbl := newBareTable(b)
	flows := make([]Flow, 0, benchmarkFlows)
	for i := 0; i < benchmarkFlows; i++ {
		client := netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i >> 16)}), uint16(i))
		svc := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(i % 250)}), uint16(53+i%4))
		endpoint := netip.AddrPortFrom(netip.AddrFrom4([4]byte{203, 0, 113, byte(i % 100)}), 5353)
		f := Flow{Protocol: UDP, OrigSrc: client, OrigDst: svc, ReplySrc: endpoint, ReplyDst: client}
		flows = append(flows, f)
		if err := tbl.inject(f); err != nil {
			b.Fatalf("after %d flows: %v", i, err)
		}
	}
	// Endpoint 203.0.113.0 (1% of the flows) is gone.
	stale := func(f Flow) bool { return f.ReplySrc.Addr() == netip.MustParseAddr("203.0.113.0") }
	reinject := func() {
		for _, f := range flows {
			if stale(f) {
				tbl.inject(f)
			}
		}
	}

	b.Run(fmt.Sprintf("stream/flows=%d", benchmarkFlows), func(b *testing.B) {
		peak := watchHeap(b)
		for i := 0; i < b.N; i++ {
			n, err := tbl.DeleteFlowsMatching(4, UDP, stale)
			if err != nil || n != benchmarkFlows/100 {
				b.Fatalf("deleted %d, %v; want %d", n, err, benchmarkFlows/100)
			}
			b.StopTimer()
			reinject()
			b.StartTimer()
		}
		peak()
	})
	b.Run(fmt.Sprintf("whole-table/flows=%d", benchmarkFlows), func(b *testing.B) {
		peak := watchHeap(b)
		for i := 0; i < b.N; i++ {
			all, err := tbl.conn.Dump(nil)
			if err != nil || len(all) < benchmarkFlows {
				b.Fatalf("dumped %d, %v", len(all), err)
			}
			runtime.KeepAlive(all)
		}
		peak()
	})
}

// watchHeap samples the live heap every millisecond until the returned
// function is called, which reports the peak above the starting point.
func watchHeap(b *testing.B) func() {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	b.ResetTimer()
	return func() {
		b.StopTimer()
		close(stop)
		<-done
		over := float64(0)
		if p := peak.Load(); p > base {
			over = float64(p - base)
		}
		b.ReportMetric(over/(1<<20), "peak-heap-MiB")
	}
}
