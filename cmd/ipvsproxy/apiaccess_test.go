package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/healthcheck"
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/kubeapi/kubeapitest"
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/metrics"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networking "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// A cluster as the fake API server serves it: one Service with one ready
// endpoint on this node, the Node, and the ServiceCIDR its cluster IP comes
// from; networking.k8s.io/v1 lists servicecidrs.
func fakeCluster() *fake.Clientset {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", CreationTimestamp: metav1.Now()},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
	}
	ready := true
	slice := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-a", Labels: map[string]string{discovery.LabelServiceName: "web"}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints:   []discovery.Endpoint{{Addresses: []string{"10.244.1.5"}, Conditions: discovery.EndpointConditions{Ready: &ready}}},
		Ports:       []discovery.EndpointPort{{Name: ptrTo("http"), Port: ptrTo(int32(8080)), Protocol: ptrTo(v1.ProtocolTCP)}},
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}}
	cidr := &networking.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
		Spec: networking.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/16"}}}
	client := fake.NewClientset(svc, slice, node, cidr)
	client.Resources = []*metav1.APIResourceList{{GroupVersion: "networking.k8s.io/v1",
		APIResources: []metav1.APIResource{{Name: "servicecidrs", Kind: "ServiceCIDR"}}}}
	return client
}

// fastRecovery polls failing informers every 10 ms for one test.
func fastRecovery(t *testing.T) {
	old := recoveryPoll
	recoveryPoll = 10 * time.Millisecond
	t.Cleanup(func() { recoveryPoll = old })
}

func ptrTo[T any](v T) *T { return &v }

// forbidList makes the fake API server answer 403 to lists of resource
// while forbidden holds, as it answers a ServiceAccount whose ClusterRole
// lacks the rule.
func forbidList(client *fake.Clientset, resource schema.GroupResource, forbidden *atomic.Bool) {
	client.PrependReactor("list", resource.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		if !forbidden.Load() {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(resource, "", errors.New(`User "system:serviceaccount:kube-system:ipvsproxy" cannot list resource "`+
			resource.Resource+`" in API group "`+resource.Group+`" at the cluster scope`))
	})
}

// daemonUnderTest is the proxier on the fakes with the run wiring around it.
type daemonUnderTest struct {
	proxier  *proxier.Proxier
	links    *netif.Fake
	ipvs     *ipvs.Fake
	health   *healthcheck.ProxyHealth
	metrics  *metrics.Metrics
	recorder *record.FakeRecorder
	synced   chan proxier.SyncResult
}

func newDaemonUnderTest(t *testing.T) *daemonUnderTest {
	t.Helper()
	d := &daemonUnderTest{links: netif.NewFake(owned.DummyInterface), ipvs: ipvs.NewFake(),
		metrics: metrics.New(), recorder: record.NewFakeRecorder(20), synced: make(chan proxier.SyncResult, 16)}
	d.links.SetHostAddresses(netip.MustParseAddr("198.51.100.1"))
	k := adapters.Kernel{IPVS: d.ipvs, Netif: d.links, IPSet: ipset.NewFake(),
		IPTables:  map[v1.IPFamily]iptables.Interface{v1.IPv4Protocol: iptables.NewFake(iptables.IPv4)},
		Conntrack: conntrack.NewFake()}
	families := []v1.IPFamily{v1.IPv4Protocol}
	cfg := ipvsproxy.DefaultConfig()
	cfg.Families = families
	cfg.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	var err error
	if d.proxier, err = proxier.New(cfg, "node1", k, d.recorder); err != nil {
		t.Fatal(err)
	}
	d.health = healthcheck.NewProxyHealth(time.Minute, clock.RealClock{})
	serviceHealth := healthcheck.NewServiceHealthServer(nil, nil, d.health)
	t.Cleanup(serviceHealth.Close)
	observeProxier(d.proxier, d.metrics, d.health, serviceHealth, families)
	observe := d.proxier.OnSync
	d.proxier.OnSync = func(r proxier.SyncResult) { observe(r); d.synced <- r }
	return d
}

// start runs startInformers as runAction does, the guard's addresses from
// every Node, and returns what it waits for.
func (d *daemonUnderTest) start(t *testing.T, ctx context.Context, client *fake.Clientset) []cache.InformerSynced {
	t.Helper()
	return d.startWith(t, ctx, client, nodeAddressSource{})
}

func (d *daemonUnderTest) startWith(t *testing.T, ctx context.Context, client *fake.Clientset, nodes nodeAddressSource) []cache.InformerSynced {
	t.Helper()
	synced, err := startInformers(ctx, kubeapitest.FromClientset(client), "node1", d.proxier.Tracker(), d.proxier.ClusterNodes(), nodes,
		newAPIAccess(d.health, d.metrics.APIPermissionMissing, d.recorder, "node1"))
	if err != nil {
		t.Fatal(err)
	}
	return synced
}

// eventsWhen returns the events recorded until one holds every part, or
// all of them after 5 s: the reflector's error handler marks health and the
// metric before it records the Event, so a test that saw those has not yet
// necessarily seen the Event.
func (d *daemonUnderTest) eventsWhen(parts ...string) string {
	var seen []string
	deadline := time.After(5 * time.Second)
	for {
		select {
		case e := <-d.recorder.Events:
			seen = append(seen, e)
			if containsAll(e, parts) {
				return strings.Join(seen, "\n")
			}
		case <-deadline:
			return strings.Join(seen, "\n")
		}
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// A ClusterRole without the servicecidrs rows (one older than the daemon,
// or kube-proxy's system:node-proxier) must not hold proxying: the wiring
// reaches its first sync, binds the cluster IP as without ServiceCIDRs, and
// says what is missing in an Event on the Node and a metric. Granting the
// rule later is taken up without a restart.
func TestForbiddenServiceCIDRsFallBackAndProxy(t *testing.T) {
	fastRecovery(t)
	client := fakeCluster()
	var forbidden atomic.Bool
	forbidden.Store(true)
	forbidList(client, serviceCIDRResource, &forbidden)
	d := newDaemonUnderTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	synced := d.start(t, ctx, client)
	waitCtx, waitCancel := context.WithTimeout(ctx, 10*time.Second)
	defer waitCancel()
	if !cache.WaitForCacheSync(waitCtx.Done(), synced...) {
		t.Fatal("still waiting for informers 10 s after start with servicecidrs forbidden")
	}
	stopped := startSyncLoop(ctx, d.proxier)
	defer func() { cancel(); <-stopped }()
	select {
	case r := <-d.synced:
		if err := r.Err(); err != nil || !r.Full {
			t.Fatalf("first sync: full=%v err=%v", r.Full, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no first sync within 10 s")
	}
	if !strings.Contains(d.ipvs.Dump(), "10.96.0.10:80") {
		t.Errorf("no virtual server for the cluster IP:\n%s", d.ipvs.Dump())
	}
	if addrs, _ := d.links.DummyAddresses(); !containsAddr(addrs, "10.96.0.10") {
		t.Errorf("cluster IP not bound on its own without ServiceCIDRs: %v", addrs)
	}
	events := d.eventsWhen("Warning "+EventAPIPermissionMissing, "servicecidrs.networking.k8s.io")
	if !strings.Contains(events, "Warning "+EventAPIPermissionMissing) || !strings.Contains(events, "servicecidrs.networking.k8s.io") ||
		!strings.Contains(events, "apiGroups: [networking.k8s.io], resources: [servicecidrs], verbs: [list, watch]") {
		t.Errorf("events %q, want a Warning naming the missing servicecidrs rule", events)
	}
	missing := d.metrics.APIPermissionMissing.WithLabelValues("networking.k8s.io", "servicecidrs", "list")
	if got := testutil.ToFloat64(missing); got != 1 {
		t.Errorf("ipvsproxy_api_permission_missing{servicecidrs,list} = %v, want 1", got)
	}

	// The rule granted: the reflector's next list (its backoff starts at
	// 0.8 s) brings the ServiceCIDR, and the metric clears.
	forbidden.Store(false)
	deadline := time.Now().Add(15 * time.Second)
	for len(d.proxier.Tracker().ServiceCIDRRanges()) == 0 || testutil.ToFloat64(missing) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("15 s after the grant: ranges %v, metric %v", d.proxier.Tracker().ServiceCIDRRanges(), testutil.ToFloat64(missing))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func containsAddr(addrs []netip.Addr, want string) bool {
	for _, a := range addrs {
		if a.String() == want {
			return true
		}
	}
	return false
}

// A required list that is forbidden holds the first sync, as it must (a
// sync without every Service would delete their virtual servers), and
// /readyz and /healthz say why within seconds instead of only the log.
func TestForbiddenServicesListShowsOnHealth(t *testing.T) {
	fastRecovery(t)
	client := fakeCluster()
	var forbidden atomic.Bool
	forbidden.Store(true)
	forbidList(client, v1.Resource("services"), &forbidden)
	d := newDaemonUnderTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d.start(t, ctx, client)
	server := httptest.NewServer(d.health.Handler())
	defer server.Close()

	get := func(path string) (int, string) {
		resp, err := http.Get(server.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	named := func(body string) bool {
		return strings.Contains(body, `"listFailures":{"services":`) && strings.Contains(body, "forbidden")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		readyCode, ready := get("/readyz")
		healthCode, health := get("/healthz")
		if readyCode == http.StatusServiceUnavailable && named(ready) && healthCode == http.StatusServiceUnavailable && named(health) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after start: /readyz %d %s\n/healthz %d %s", readyCode, ready, healthCode, health)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := testutil.ToFloat64(d.metrics.APIPermissionMissing.WithLabelValues("", "services", "list")); got != 1 {
		t.Errorf("ipvsproxy_api_permission_missing{services,list} = %v, want 1", got)
	}
	if events := d.eventsWhen("apiGroups: [\"\"], resources: [services]"); !strings.Contains(events, "apiGroups: [\"\"], resources: [services]") {
		t.Errorf("events %q, want one naming the missing services rule", events)
	}

	// Granted: the Service informer lists, the failure leaves the bodies.
	forbidden.Store(false)
	deadline = time.Now().Add(15 * time.Second)
	for {
		_, ready := get("/readyz")
		if !strings.Contains(ready, "listFailures") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("15 s after the grant /readyz still says %s", ready)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Through the daemon's informers, whose cache holds compact slices, a bad
// endpoint is still reported on the slice that holds it, word for word:
// an address that is no IP address (kept as written), one of the other
// family, a port out of range; the good endpoint is served.
func TestBadEndpointsThroughTheCacheAreReportedOnTheirSlice(t *testing.T) {
	client := fakeCluster()
	bad := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-bad", UID: "0b5e3c1a-0000-4000-8000-00000000000b", Labels: map[string]string{discovery.LabelServiceName: "web"}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints: []discovery.Endpoint{{Addresses: []string{"not-an-ip"}}, {Addresses: []string{"fe80::1%eth0"}}, {Addresses: []string{"2001:db8::5"}},
			{Addresses: []string{"10.244.1.6"}}},
		Ports: []discovery.EndpointPort{{Name: ptrTo("http"), Port: ptrTo(int32(8080)), Protocol: ptrTo(v1.ProtocolTCP)},
			{Name: ptrTo("big"), Port: ptrTo(int32(70000))}},
	}
	if _, err := client.DiscoveryV1().EndpointSlices("default").Create(context.Background(), bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := newDaemonUnderTest(t)
	d.recorder.IncludeObject = true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	synced := d.start(t, ctx, client)
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		t.Fatal("the informers did not sync")
	}
	stopped := startSyncLoop(ctx, d.proxier)
	defer func() { cancel(); <-stopped }()
	select {
	case r := <-d.synced:
		if err := r.Err(); err != nil {
			t.Fatalf("first sync: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no first sync within 10 s")
	}
	if dump := d.ipvs.Dump(); !strings.Contains(dump, "10.244.1.5:8080") || !strings.Contains(dump, "10.244.1.6:8080") {
		t.Errorf("the good endpoints are not served:\n%s", dump)
	}
	onSlice := "involvedObject{kind=EndpointSlice,apiVersion=discovery.k8s.io/v1}"
	wants := []string{
		`Warning InvalidEndpoint endpoint address "not-an-ip" is not an IP address ` + onSlice,
		`Warning InvalidEndpoint endpoint address "fe80::1%eth0" is not an IP address ` + onSlice,
		`Warning InvalidEndpoint endpoint address 2001:db8::5 is not IPv4 ` + onSlice,
		`Warning InvalidEndpoint port 70000 out of range ` + onSlice,
	}
	var events []string
	for deadline := time.After(5 * time.Second); len(events) < len(wants); {
		select {
		case e := <-d.recorder.Events:
			events = append(events, e)
		case <-deadline:
			t.Fatalf("events %q, want %q", events, wants)
		}
	}
	for _, want := range wants {
		if !slices.Contains(events, want) {
			t.Errorf("no event %q; events:\n%s", want, strings.Join(events, "\n"))
		}
	}
}
