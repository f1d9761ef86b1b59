package main

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/healthcheck"
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/kubeapi"
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/kubeapi/kubeapitest"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	krt "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// BenchmarkDaemonHeap is the daemon's live heap at N Services × 10
// endpoints, measured on the daemon's own wiring in this process: the
// informers startInformers starts (their caches holding what trimCached
// keeps), the tracker, Proxier.Run with its periodic re-check read beside
// the loop, every adapter a Fake. It reports the live heap after the first
// full sync and after the first periodic re-check, split by owner (the
// allocation's nearest frame that names one: heapOwners); the Fakes stand
// for the kernel's memory and are reported apart, not in daemon-MiB.
//
// Every allocation is recorded (runtime.MemProfileRate 1), so the split is
// exact and the benchmark slow. IPVSPROXY_HEAP_SERVICES lists the sizes
// (default 10000); IPVSPROXY_HEAP_PROFILES, when set, is a directory that
// receives each heap profile, for `go tool pprof -top
// -sample_index=inuse_space` (make bench-daemon-heap). The objects are
// what e2ectl bulk-services creates for the VM's daemon benchmark: one
// TCP port, ClusterIP, one slice of 10 endpoints on 100 nodes.
func BenchmarkDaemonHeap(b *testing.B) {
	klog.SetLogger(klog.Background().V(10)) // discard: no log line at V(10) is on
	runtime.MemProfileRate = 1
	sizes := []int{10000}
	if env := os.Getenv("IPVSPROXY_HEAP_SERVICES"); env != "" {
		sizes = nil
		for _, s := range strings.Split(env, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 {
				b.Fatalf("IPVSPROXY_HEAP_SERVICES=%q: want sizes like 10000,50000", env)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				measureDaemonHeap(b, n, os.Getenv("IPVSPROXY_HEAP_PROFILES"))
			}
		})
	}
}

func measureDaemonHeap(b *testing.B, n int, profiles string) {
	const nodeName = "bench"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base := liveHeapNow()

	links := netif.NewFake(owned.DummyInterface)
	links.SetHostAddresses(netip.MustParseAddr("198.51.100.10"))
	families := []v1.IPFamily{v1.IPv4Protocol}
	k, _, err := adapters.Open(adapters.Options{Fake: true, Families: families, Links: links})
	if err != nil {
		b.Fatal(err)
	}
	cfg := ipvsproxy.DefaultConfig()
	cfg.Families = families
	cfg.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	cfg.ServiceCIDRs = []netip.Prefix{heapServiceCIDR}
	p, err := proxier.New(cfg, nodeName, k, nil)
	if err != nil {
		b.Fatal(err)
	}
	p.ReadBeside(k) // adapters.OpenReader's answer for the Fakes
	m := newDaemonMetrics()
	health := healthcheck.NewProxyHealth(cfg.SyncPeriod, clock.RealClock{})
	serviceHealth := healthcheck.NewServiceHealthServer(nil, nil, health)
	defer serviceHealth.Close()
	observeProxier(p, m, health, serviceHealth, families)
	results := make(chan proxier.SyncResult, 64)
	observe := p.OnSync
	p.OnSync = func(r proxier.SyncResult) {
		observe(r)
		select {
		case results <- r:
		default:
		}
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "198.51.100.10"}}}}
	client := bulkClient{Client: kubeapitest.FromClientset(fake.NewClientset(node)), services: n}
	synced, err := startInformers(ctx, client, nodeName, p.Tracker(), p.ClusterNodes(), nodeAddressSource{},
		newAPIAccess(health, m.APIPermissionMissing, record.NewFakeRecorder(100), nodeName))
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		b.Fatal("informers did not sync")
	}
	b.Logf("%d Services: informers synced in %v", n, time.Since(start).Round(time.Millisecond))
	stopped := make(chan struct{})
	go func() { p.Run(ctx); close(stopped) }()
	wait := func(what string, done func(proxier.SyncResult) bool) {
		deadline := time.After(30 * time.Minute)
		for {
			select {
			case r := <-results:
				if r.Err() != nil || !r.Completed {
					b.Fatalf("%s: sync failed: %v", what, r.Err())
				}
				if done(r) {
					b.Logf("%d Services: %s in %v", n, what, r.Duration.Round(time.Millisecond))
					return
				}
			case <-deadline:
				b.Fatalf("%s: no sync in 30 minutes", what)
			}
		}
	}
	report := func(when string) {
		owners, where := heapByOwner()
		daemon := owners.total() - owners[ownerFakes]
		// Printed, not logged: a benchmark's log is cut short.
		fmt.Printf("%d Services, %s: live heap %.1f MiB, the daemon's %.1f MiB (%.0f bytes per Service)\n%s",
			n, when, mib(owners.total()), mib(daemon), float64(daemon)/float64(n), owners)
		if os.Getenv("IPVSPROXY_HEAP_FRAMES") != "" {
			fmt.Printf("by the frame that named the owner (the allocation's own for other):\n%s", where.top(40))
		}
		b.ReportMetric(mib(daemon), when+"-daemon-MiB")
		b.ReportMetric(mib(owners[ownerFakes]), when+"-fakes-MiB")
		if profiles != "" {
			path := filepath.Join(profiles, fmt.Sprintf("heap-%d-%s.pprof", n, when))
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
				b.Fatal(err)
			}
		}
	}
	wait("cold sync", func(r proxier.SyncResult) bool { return r.Full })
	report("cold")
	wait("periodic re-check", func(r proxier.SyncResult) bool { return r.ReadBeside > 0 })
	report("recheck")
	cancel()
	<-stopped
	runtime.KeepAlive(p)
	// What stays once the daemon's parts are gone: the Fakes, checking
	// the split's.
	p, client = nil, bulkClient{}
	b.ReportMetric(mib(liveHeapNow()-base), "fakes-by-drop-MiB")
	runtime.KeepAlive(k)
}

func mib[T int64 | uint64](n T) float64 { return float64(n) / (1 << 20) }

func liveHeapNow() uint64 {
	runtime.GC()
	runtime.GC()
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	return s.HeapAlloc
}

// heapServiceCIDR is where the API server allocates the cluster IPs.
var heapServiceCIDR = netip.MustParsePrefix("10.96.0.0/12")

// bulkClient serves the Services and EndpointSlices of e2ectl's
// bulk-services (and default/kubernetes), made on each list: an object
// tracker would keep a second copy of all of them in the process.
type bulkClient struct {
	kubeapi.Client
	services int
}

func (c bulkClient) Services() kubeapi.ListWatcher[*v1.ServiceList] {
	return bulkLister[*v1.ServiceList]{list: func() *v1.ServiceList {
		out := &v1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "1000000"}, Items: make([]v1.Service, 0, c.services+1)}
		out.Items = append(out.Items, v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes", UID: bulkUID(0, 0), ResourceVersion: "1"},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1"},
				Ports: []v1.ServicePort{{Name: "https", Protocol: v1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(6443)}}}})
		for i := range c.services {
			out.Items = append(out.Items, *bulkService(i))
		}
		return out
	}}
}

func (c bulkClient) EndpointSlices() kubeapi.ListWatcher[*discovery.EndpointSliceList] {
	return bulkLister[*discovery.EndpointSliceList]{list: func() *discovery.EndpointSliceList {
		out := &discovery.EndpointSliceList{ListMeta: metav1.ListMeta{ResourceVersion: "1000000"}, Items: make([]discovery.EndpointSlice, 0, c.services+1)}
		out.Items = append(out.Items, discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes", UID: bulkUID(0, 1), ResourceVersion: "2",
			Labels: map[string]string{discovery.LabelServiceName: "kubernetes"}},
			AddressType: discovery.AddressTypeIPv4, Ports: []discovery.EndpointPort{{Name: ptrTo("https"), Protocol: ptrTo(v1.ProtocolTCP), Port: ptrTo(int32(6443))}},
			Endpoints: []discovery.Endpoint{{Addresses: []string{"203.0.113.5"}, Conditions: discovery.EndpointConditions{Ready: ptrTo(true)}}}})
		for i := range c.services {
			out.Items = append(out.Items, *bulkSlice(i))
		}
		return out
	}}
}

// IsWatchListSemanticsUnSupported: the informers list, as on the fake
// clientset behind the other kinds. The caches end the same; a list holds
// every object decoded at once, a transient this benchmark does not report.
func (bulkClient) IsWatchListSemanticsUnSupported() bool { return true }

type bulkLister[L krt.Object] struct{ list func() L }

func (l bulkLister[L]) List(context.Context, metav1.ListOptions) (L, error) { return l.list(), nil }

// Watch sends nothing: nothing changes after the list.
func (l bulkLister[L]) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return watch.NewFake(), nil
}

func bulkUID(i, k int) types.UID {
	return types.UID(fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", i, k, i%4096, k%4096, i*10+k))
}

// bulkService is Service i of e2ectl bulk-services as the API server
// returns it.
func bulkService(i int) *v1.Service {
	name := fmt.Sprintf("svc-%d", i)
	ip := heapServiceCIDR.Addr().As4()
	n := uint32(i + 2)
	ip[1], ip[2], ip[3] = ip[1]+byte(n>>16), byte(n>>8), byte(n)
	labels := map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "bench"}
	family, policy := v1.IPv4Protocol, v1.IPFamilyPolicySingleStack
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench", Labels: labels, UID: bulkUID(i, 0xffff),
			ResourceVersion: strconv.Itoa(1000 + 2*i), CreationTimestamp: metav1.Unix(1700000000+int64(i), 0)},
		Spec: v1.ServiceSpec{
			Selector: map[string]string{"app.kubernetes.io/name": name},
			Ports:    []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
			Type:     v1.ServiceTypeClusterIP, ClusterIP: netip.AddrFrom4(ip).String(), ClusterIPs: []string{netip.AddrFrom4(ip).String()},
			IPFamilies: []v1.IPFamily{family}, IPFamilyPolicy: &policy, SessionAffinity: v1.ServiceAffinityNone,
			InternalTrafficPolicy: ptrTo(v1.ServiceInternalTrafficPolicyCluster),
		},
	}
}

// bulkSlice is Service i's EndpointSlice as the API server returns it: 10
// endpoints, each naming its pod, node and zone.
func bulkSlice(i int) *discovery.EndpointSlice {
	const endpoints = 10
	name := fmt.Sprintf("svc-%d", i)
	eps := make([]discovery.Endpoint, endpoints)
	for k := range eps {
		n := uint32(i*endpoints+k) % 65536
		pod := fmt.Sprintf("%s-%08x-%05x", name, uint32(i)*2654435761, uint32(i*endpoints+k)*40503%0xfffff)
		eps[k] = discovery.Endpoint{
			Addresses:  []string{netip.AddrFrom4([4]byte{10, 244, byte(n >> 8), byte(n)}).String()},
			Conditions: discovery.EndpointConditions{Ready: ptrTo(true), Serving: ptrTo(true), Terminating: ptrTo(false)},
			NodeName:   ptrTo(fmt.Sprintf("node-%d", (i+k)%100)),
			Zone:       ptrTo(fmt.Sprintf("zone-%c", 'a'+(i+k)%3)),
			TargetRef:  &v1.ObjectReference{Kind: "Pod", Namespace: "bench", Name: pod, UID: bulkUID(i, k)},
		}
	}
	return &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-bench", Namespace: "bench", UID: bulkUID(i, 0xfffe), ResourceVersion: strconv.Itoa(1001 + 2*i),
			Labels: map[string]string{discovery.LabelServiceName: name, discovery.LabelManagedBy: "endpointslice-controller.k8s.io",
				"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "bench"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: name, UID: bulkUID(i, 0xffff), Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}},
		},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints:   eps,
		Ports:       []discovery.EndpointPort{{Name: ptrTo("http"), Protocol: ptrTo(v1.ProtocolTCP), Port: ptrTo(int32(8080))}},
	}
}

// The owners of the daemon's heap, and the Fakes standing for the kernel.
const (
	ownerCompactObjects = "informer caches: compact Services and slices"
	ownerInformerStores = "informer queues (client-go)"
	ownerTracker        = "change tracker"
	ownerDesired        = "desired state"
	ownerClusterIPs     = "cluster-IP index"
	ownerView           = "kernel view"
	ownerStatus         = "object status"
	ownerProxierOther   = "proxier, other"
	ownerOther          = "other"
	ownerFakes          = "kernel Fakes (not the daemon's)"
)

// heapOwnerRules name an allocation's owner by the nearest frame (from
// the allocation up) whose function contains one of the patterns. A
// Fake's reads return lists its caller keeps (the view keeps them as the
// real adapters' reads): only its writes make the Fake's own state.
var heapOwnerRules = []struct {
	owner    string
	patterns []string
}{
	{ownerFakes, fakeWrites},
	// The names the compact objects keep are the decoded ones (here made
	// by the lists).
	{ownerCompactObjects, []string{"cmd/ipvsproxy.bulkService", "cmd/ipvsproxy.bulkSlice", "ipvsproxy.CompactEndpointSlice", "ipvsproxy.CompactService", "cmd/ipvsproxy.trimCached", "sharedslices.", "ipvsproxy.(*interner)"}},
	{ownerInformerStores, []string{"k8s.io/client-go/tools/cache.", "k8s.io/utils/buffer."}},
	{ownerTracker, []string{"ipvsproxy.(*ChangeTracker)"}},
	{ownerClusterIPs, []string{"ipvsproxy.(*ClusterIPIndex)"}},
	{ownerDesired, []string{"ipvsproxy.BuildService", "ipvsproxy.(*builder)", "ipvsproxy.(*DesiredState)", "ipvsproxy.(*ServiceState)", "ipvsproxy.(*setEntries)", "ipvsproxy.(*Touched)"}},
	{ownerView, []string{"proxier.(*kernelView)", "proxier.(*kernelVirtualServer)", "proxier.newKernelVirtualServer", "proxier.(*realServerList)", "proxier.readKernel", "proxier.recycledView", "proxier.readVirtualServer", "proxier.viewOfRead", "recheck",
		"proxier.(*reconciler).createAhead", "proxier.(*reconciler).recordAhead", "proxier.(*reconciler).addEntries"}},
	{ownerStatus, []string{"proxier.(*statusTable)", "proxier.newStatusTable"}},
	{ownerProxierOther, []string{"internal/proxier."}},
}

// fakeWrites are the Fakes' methods that keep what they are given.
var fakeWrites = func() (out []string) {
	for _, m := range []string{"AddVirtualServer", "UpdateVirtualServer", "AddRealServer", "UpdateRealServer", "CreateSet", "AddEntry",
		"SwapSets", "EnsureDummy", "AddDummyAddress", "AddServiceRoute", "Restore", "restore", "EnsureRule", "SetTimeouts", "begin"} {
		out = append(out, ".(*Fake)."+m)
	}
	return out
}()

// heapOwners are live bytes by owner.
type heapOwners map[string]int64

func (o heapOwners) total() (n int64) {
	for _, v := range o {
		n += v
	}
	return n
}

func (o heapOwners) String() string {
	names := make([]string, 0, len(o))
	for name := range o {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(o[b], o[a]) })
	var s strings.Builder
	for _, name := range names {
		fmt.Fprintf(&s, "  %-48s %7.2f MiB\n", name, mib(o[name]))
	}
	return s.String()
}

// heapByOwner is the live heap of the last collection, by owner: every
// allocation is recorded (MemProfileRate 1), and the profile counts what
// the last completed cycle found live (hence two collections first).
func heapByOwner() (owners, frames heapOwners) {
	runtime.GC()
	runtime.GC()
	var records []runtime.MemProfileRecord
	for {
		n, _ := runtime.MemProfile(nil, false)
		records = make([]runtime.MemProfileRecord, n+50)
		if n, ok := runtime.MemProfile(records, false); ok {
			records = records[:n]
			break
		}
	}
	owners, frames = heapOwners{}, heapOwners{}
	for _, r := range records {
		if live := r.InUseBytes(); live > 0 {
			owner, frame := ownerOf(r.Stack())
			owners[owner] += live
			frames[owner+": "+frame] += live
		}
	}
	return owners, frames
}

// ownerOf is the owner of an allocation made at stack, and the frame that
// named it (the allocation's own frame, skipping the runtime's, when none
// did).
func ownerOf(stack []uintptr) (owner, frame string) {
	frames := runtime.CallersFrames(stack)
	for {
		f, more := frames.Next()
		if frame == "" && !strings.HasPrefix(f.Function, "runtime.") {
			frame = f.Function
		}
		for _, rule := range heapOwnerRules {
			for _, p := range rule.patterns {
				if strings.Contains(f.Function, p) {
					return rule.owner, f.Function
				}
			}
		}
		if !more {
			return ownerOther, frame
		}
	}
}

// top is the n largest, one a line.
func (o heapOwners) top(n int) string {
	lines := strings.SplitAfter(o.String(), "\n")
	return strings.Join(lines[:min(n, len(lines))], "")
}
