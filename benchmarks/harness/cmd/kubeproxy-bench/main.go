// Command kubeproxy-bench is the anchor of the benchmarks: kube-proxy
// v1.37.2's own IPVS proxier (k8s.io/kubernetes/pkg/proxy/ipvs), driven
// through its public handlers with its own fakes for IPVS, ipset, iptables
// and sysctl, on the same shapes as ipvsproxy. It binds addresses on
// kube-ipvs0 over real netlink (an ifb link in a private namespace, see
// ../../netns) as it would on a node. The time of a sync is kube-proxy's
// own sync_proxy_rules_duration_seconds. Prints one shape.Result as JSON.
//
// With -kernel it drives the real kernel instead (tier 2, in the end-to-end
// VM: e2e/vm/bench-vm.sh): kube-proxy's own IPVS netlink, ipset and
// iptables implementations, in a fresh namespace where it makes kube-ipvs0
// itself, the sysctls still faked as for ipvsproxy's kernel-bench. Every
// kernel call of its cold sync is then timed (cold_calls in the result, as
// kernel-bench does for ipvsproxy): its ipset and iptables calls each start
// a process, and under the VM's emulation starting one costs far more than
// on a real CPU, so the split says how much of its time that is.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/harness/callclock"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/harness/netns"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/metrics/testutil"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
	sysctltest "k8s.io/component-helpers/node/util/sysctl/testing"
	"k8s.io/klog/v2"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/ipvs"
	utilipset "k8s.io/kubernetes/pkg/proxy/ipvs/ipset"
	ipsettest "k8s.io/kubernetes/pkg/proxy/ipvs/ipset/testing"
	utilipvs "k8s.io/kubernetes/pkg/proxy/ipvs/util"
	ipvstest "k8s.io/kubernetes/pkg/proxy/ipvs/util/testing"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
	iptablestest "k8s.io/kubernetes/pkg/util/iptables/testing"
)

func main() {
	services := flag.Int("services", 1000, "Services in the shape")
	endpoints := flag.Int("endpoints", 10, "endpoints per Service")
	repeats := flag.Int("repeats", 5, "repeats of each operation after the cold sync")
	kernel := flag.Bool("kernel", false, "drive the real kernel, not kube-proxy's fakes (tier 2, in the VM)")
	noServiceCIDR := flag.Bool("no-service-cidr", false, "name the result as ipvsproxy's shape without a Service CIDR (kube-proxy binds every cluster IP either way)")
	fakeLink := flag.Bool("fake-link", false, "kube-ipvs0 and the node's addresses on a map instead of netlink (the proxier-only shape)")
	ops := flag.String("ops", "", "the operations to repeat after the cold sync, by their names in the results, comma-separated (default every one); on the VM's kernel each of kube-proxy's syncs at 10,000 Services takes most of a minute")
	processCost := flag.Int("process-cost", 0, "instead of a benchmark, time this many ipset entries added a process each, as kube-proxy adds them, and in one ipset restore and over netlink, as ipvsproxy adds them (prints a ProcessCost as JSON)")
	flag.Parse()
	if *processCost > 0 {
		pc, err := measureProcessCost(*processCost)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kubeproxy-bench:", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "kubeproxy-bench: an ipset entry takes %.3f ms as its own process, %.3f ms as a netlink message, %.4f ms in batches, %.3f ms in one restore (%d entries)\n", pc.PerProcessMillis, pc.PerNetlinkMillis, pc.PerBatchedMillis, pc.PerRestoredMillis, pc.Entries)
		_ = json.NewEncoder(os.Stdout).Encode(pc)
		return
	}
	var errs errorLog
	klog.SetLogger(errs.logger())
	s := shape.Shape{Services: *services, Endpoints: *endpoints, NoServiceCIDR: *noServiceCIDR, FakeLink: *fakeLink}
	only, err := pickOps(*ops)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeproxy-bench:", err)
		os.Exit(2)
	}
	res, err := run(s, *repeats, *kernel, only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeproxy-bench:", err)
		os.Exit(1)
	}
	// A run in which kube-proxy logged an error (a failed restore, a
	// refused kernel write) timed a sync that did not do the work: it does
	// not count.
	if lines := errs.Errors(); len(lines) > 0 {
		for i, l := range lines {
			if i == 20 {
				fmt.Fprintf(os.Stderr, "kubeproxy-bench: ... and %d more\n", len(lines)-i)
				break
			}
			fmt.Fprintln(os.Stderr, "kubeproxy-bench: kube-proxy logged an error:", l)
		}
		fmt.Fprintf(os.Stderr, "kubeproxy-bench: kube-proxy logged %d errors on %s: the run does not count\n", len(lines), s.Name())
		os.Exit(1)
	}
	if *kernel {
		fmt.Fprintf(os.Stderr, "%s %s: cold sync %.0f ms; peak RSS %.0f MB\n", res.Side, res.Shape, res.Millis[shape.OpCold][0], res.PeakRSS)
		printColdCalls(res)
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		os.Exit(1)
	}
}

// printColdCalls splits the cold sync into kube-proxy's kernel calls, by
// kind (a process each, or netlink), and the rest.
func printColdCalls(res shape.Result) {
	kernel := callclock.Total(res.ColdCalls)
	fmt.Fprintf(os.Stderr, "  in kernel calls %.0f ms, the rest %.0f ms\n", kernel, res.Millis[shape.OpCold][0]-kernel)
	for _, n := range callclock.Names(res.ColdCalls) {
		fmt.Fprintf(os.Stderr, "  %-40s %10.1f ms %6d calls\n", n, res.ColdCalls[n].Millis, res.ColdCalls[n].Calls)
	}
}

// backends are what kube-proxy's proxier writes through: its fakes, or
// with -kernel its real implementations.
type backends struct {
	ipt    utiliptables.Interface
	ipvs   utilipvs.Interface
	ipset  utilipset.Interface
	sysctl utilsysctl.Interface
	// links replaces the proxier's netlink handle when not nil.
	links ipvs.NetLinkHandle
	// clock, when not nil, times every kernel call (-kernel): the backends
	// above are wrapped with it, and so is the proxier's own netlink handle.
	clock *callclock.Clock
}

func newBackends(kernel bool) backends {
	if kernel {
		c := callclock.New()
		b := backends{ipt: utiliptables.New(utiliptables.ProtocolIPv4), ipvs: utilipvs.New(), ipset: utilipset.New(), sysctl: sysctltest.NewFake(), clock: c}
		return timedBackends(b, c)
	}
	return backends{ipt: iptablestest.NewFake(), ipvs: ipvstest.NewFake(), ipset: ipsettest.NewFake("7.1"), sysctl: sysctltest.NewFake()}
}

func newProxier(ctx context.Context, f backends) (*ipvs.Proxier, error) {
	p, err := ipvs.NewProxier(ctx, proxierConfig(), v1.IPv4Protocol, f.ipt, f.ipvs, f.ipset, f.sysctl,
		proxyutil.NewDetectLocalByCIDR(shape.ClusterCIDR.String()), shape.NodeName,
		net.IP(shape.NodeIP.AsSlice()), events.NewFakeRecorder(1000), nil, false)
	if err == nil && f.links != nil {
		err = useLinks(p, f.links)
	} else if err == nil && f.clock != nil {
		var own ipvs.NetLinkHandle
		if own, err = linksOf(p); err == nil {
			err = useLinks(p, timedLinks{own, f.clock})
		}
	}
	return p, err
}

// proxierConfig is the configuration kube-proxy's IPVS proxier runs with here: a full resync
// every hour (the benchmark triggers its syncs itself), no minimum interval, the rr scheduler,
// masquerade bit 14 (kube-proxy's default), every other field kube-proxy's zero default.
func proxierConfig() *kubeproxyconfig.KubeProxyConfiguration {
	masqueradeBit := int32(14)
	return &kubeproxyconfig.KubeProxyConfiguration{
		SyncPeriod: metav1.Duration{Duration: time.Hour},
		IPTables:   kubeproxyconfig.KubeProxyIPTablesConfiguration{MasqueradeBit: &masqueradeBit},
		IPVS:       kubeproxyconfig.KubeProxyIPVSConfiguration{Scheduler: "rr"},
	}
}

// pickOps reads -ops: which operations run after the cold sync (nil: all).
func pickOps(list string) (map[string]bool, error) {
	if list == "" {
		return nil, nil
	}
	only := map[string]bool{}
	for _, op := range strings.Split(list, ",") {
		op = strings.TrimSpace(op)
		if op == shape.OpCold || !slices.Contains(shape.Ops, op) {
			return nil, fmt.Errorf("-ops: no operation %q", op)
		}
		only[op] = true
	}
	return only, nil
}

func run(s shape.Shape, repeats int, kernel bool, only map[string]bool) (shape.Result, error) {
	runs := func(op string) bool { return only == nil || only[op] }
	res := shape.Result{Side: "kube-proxy", Shape: s.Name(), Services: s.Services, Millis: map[string][]float64{}}
	// On a kernel without the dummy driver an ifb link stands in for
	// kube-ipvs0; with -kernel, kube-proxy makes its dummy itself.
	link := "kube-ipvs0"
	if kernel {
		res.Side, link = "kube-proxy (kernel)", ""
	}
	if s.FakeLink {
		link = ""
	}
	if err := netns.Prepare(shape.NodeIP, link); err != nil {
		return res, err
	}
	metrics.RegisterMetrics(kubeproxyconfig.ProxyModeIPVS)
	latency := metrics.SyncProxyRulesLatency.WithLabelValues(string(v1.IPv4Protocol))
	ctx := context.Background()
	f := newBackends(kernel)
	if s.FakeLink {
		f.links = newMapLinks(shape.NodeIP.String())
	}

	// world is the latest of every object, for the restarted proxier.
	services := map[string]*v1.Service{}
	slices := map[string]*discovery.EndpointSlice{}
	p, err := newProxier(ctx, f)
	if err != nil {
		return res, fmt.Errorf("new proxier: %w", err)
	}
	setService := func(svc *v1.Service) {
		if old := services[svc.Name]; old != nil {
			p.OnServiceUpdate(old, svc)
		} else {
			p.OnServiceAdd(svc)
		}
		services[svc.Name] = svc
	}
	setSlices := func(sls []*discovery.EndpointSlice) {
		for _, sl := range sls {
			if old := slices[sl.Name]; old != nil {
				p.OnEndpointSliceUpdate(old, sl)
			} else {
				p.OnEndpointSliceAdd(sl)
			}
			slices[sl.Name] = sl
		}
	}
	// longest is the longest sync the running loop made: a sync it still
	// has queued takes about as long. The cold and restart syncs are not
	// the loop's (at 50,000 Services the cold one took minutes, and waiting
	// twice that before each restart made most of the run idle).
	var longest time.Duration
	record := func(op string, seconds float64) {
		res.Millis[op] = append(res.Millis[op], seconds*1000)
	}
	// cold: OnServiceSynced runs the first sync itself, synchronously;
	// the histogram's sum grows by its duration.
	//
	// Only the first proxier gets a sync loop: kube-proxy's SyncLoop never
	// returns, so a loop per restarted proxier kept every one of them alive,
	// counted in the peak RSS and scanned by every GC. A restart
	// is timed by its first sync alone, which needs no loop.
	startProxier := func(op string, loop bool) error {
		if op == shape.OpCold && f.clock != nil {
			f.clock.Reset() // NewProxier's own calls are not the sync's
		}
		before, _ := testutil.GetHistogramMetricValue(latency)
		p.OnEndpointSlicesSynced()
		p.OnServiceSynced()
		after, err := testutil.GetHistogramMetricValue(latency)
		if err != nil {
			return err
		}
		record(op, after-before)
		if op == shape.OpCold && f.clock != nil {
			res.ColdCalls = f.clock.Reset()
		}
		if loop {
			go p.SyncLoop()
		}
		return nil
	}
	// sync asks the running loop for a sync and waits for it to be observed.
	sync := func(op string) error {
		count, _ := testutil.GetHistogramMetricCount(latency)
		sum, _ := testutil.GetHistogramMetricValue(latency)
		p.Sync()
		deadline := time.Now().Add(10 * time.Minute)
		for {
			c, err := testutil.GetHistogramMetricCount(latency)
			if err != nil {
				return err
			}
			if c > count {
				after, _ := testutil.GetHistogramMetricValue(latency)
				record(op, after-sum)
				longest = max(longest, time.Duration((after-sum)*float64(time.Second)))
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: no sync observed", op)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}

	for i := 0; i < s.Services; i++ {
		setService(s.Service(i))
		setSlices(s.Slices(i, s.Endpoints, 0))
	}
	if err := startProxier(shape.OpCold, true); err != nil {
		return res, err
	}
	if vss, err := f.ipvs.GetVirtualServers(); err != nil || len(vss) < s.Services {
		return res, fmt.Errorf("cold sync programmed %d virtual servers for %d Services (%v)", len(vss), s.Services, err)
	}
	mid := s.Services / 2
	steps := []struct {
		op     string
		change func(rep int)
	}{
		{shape.OpEndpointAdd, func(int) { setSlices(s.Slices(mid, s.Endpoints+1, 0)) }},
		{shape.OpEndpointRemove, func(int) { setSlices(s.Slices(mid, s.Endpoints, 0)) }},
		{shape.OpServiceAdd, func(rep int) {
			setService(s.Service(s.Services + rep))
			setSlices(s.Slices(s.Services+rep, s.Endpoints, 0))
		}},
		{shape.OpNoop, func(int) {}},
		// kube-proxy's IPVS proxier has no partial sync: every sync is
		// the periodic full one, and so is every period.
		{shape.OpFullResync, func(int) {}},
		{shape.OpShareResync, func(int) {}},
		// Every period is a full sync: the average of ten is one.
		{shape.OpResyncCycle, func(int) {}},
		{shape.OpChurn, func(rep int) {
			for _, i := range shape.Churned(s, rep) {
				setSlices(s.Slices(i, s.Endpoints, rep+1))
			}
		}},
	}
	for rep := 0; rep < repeats; rep++ {
		for _, st := range steps {
			if !runs(st.op) {
				continue
			}
			st.change(rep)
			if err := sync(st.op); err != nil {
				return res, err
			}
		}
	}
	// The running loop cannot be stopped, and every handler call queued a
	// sync (at most one waits). The restarted proxiers share the fakes, which
	// are not safe for concurrent use: wait until no sync has ended for
	// longer than any of the loop's syncs took, so the last queued one is over.
	quiesce := func() error {
		quiet := 2*longest + time.Second
		last, err := testutil.GetHistogramMetricCount(latency)
		if err != nil {
			return err
		}
		for since := time.Now(); time.Since(since) < quiet; time.Sleep(10 * time.Millisecond) {
			if c, _ := testutil.GetHistogramMetricCount(latency); c != last {
				last, since = c, time.Now()
			}
		}
		return nil
	}
	for rep := 0; rep < repeats && runs(shape.OpRestart); rep++ {
		if err := quiesce(); err != nil {
			return res, err
		}
		p, err = newProxier(ctx, f)
		if err != nil {
			return res, err
		}
		for _, svc := range services {
			p.OnServiceAdd(svc)
		}
		for _, sl := range slices {
			p.OnEndpointSliceAdd(sl)
		}
		if err := startProxier(shape.OpRestart, false); err != nil {
			return res, err
		}
	}
	if f.links != nil {
		// The proxier bound its cluster IPs on the map, not over netlink.
		if bound, _ := f.links.ListBindAddress("kube-ipvs0"); len(bound) < s.Services {
			return res, fmt.Errorf("-fake-link: %d addresses bound on the map, want at least %d: the proxier did not use it", len(bound), s.Services)
		}
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	res.PeakRSS = float64(ru.Maxrss) / 1024
	return res, nil
}
