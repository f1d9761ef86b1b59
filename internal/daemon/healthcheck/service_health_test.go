package healthcheck

import (
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// onlyAddresses stands in for the node's interface addresses.
func onlyAddresses(addrs ...string) Option {
	return withHostAddresses(func() ([]netip.Addr, error) {
		var out []netip.Addr
		for _, a := range addrs {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	})
}

// newTestServiceHealth returns a synced, healthy proxier and a server bound to
// 127.0.0.1 only.
func newTestServiceHealth(t *testing.T, recorder record.EventRecorder, opts ...Option) (*ServiceHealthServer, *ProxyHealth, *clocktesting.FakeClock) {
	t.Helper()
	clock := clocktesting.NewFakeClock(start)
	health := NewProxyHealth(syncPeriod, clock)
	health.Updated()
	opts = append([]Option{onlyAddresses("127.0.0.1")}, opts...)
	s := NewServiceHealthServer(loopback, recorder, health, opts...)
	t.Cleanup(s.Close)
	return s, health, clock
}

type serviceAnswer struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints      int  `json:"localEndpoints"`
	ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
}

func checkServiceAnswer(t *testing.T, url string, name types.NamespacedName, wantCode, wantEndpoints int, wantHealthy bool) {
	t.Helper()
	resp := get(t, url)
	if resp.code != wantCode {
		t.Errorf("GET %s = %d, want %d (body %s)", url, resp.code, wantCode, resp.body)
	}
	for header, want := range map[string]string{
		"Content-Type":                     "application/json",
		"X-Content-Type-Options":           "nosniff",
		"X-Load-Balancing-Endpoint-Weight": strconv.Itoa(wantEndpoints),
	} {
		if got := resp.header.Get(header); got != want {
			t.Errorf("GET %s %s = %q, want %q", url, header, got, want)
		}
	}
	if want := string(serviceHealthBody(name, wantEndpoints, wantHealthy)); resp.body != want {
		t.Errorf("GET %s body:\n got %q\nwant %q", url, resp.body, want)
	}
	var answer serviceAnswer
	if err := json.Unmarshal([]byte(resp.body), &answer); err != nil {
		t.Fatalf("GET %s: body is not JSON: %v", url, err)
	}
	if answer.Service.Namespace != name.Namespace || answer.Service.Name != name.Name ||
		answer.LocalEndpoints != wantEndpoints || answer.ServiceProxyHealthy != wantHealthy {
		t.Errorf("GET %s decoded %+v, want %s with %d endpoints, healthy %v", url, answer, name, wantEndpoints, wantHealthy)
	}
}

func TestServiceHealthBodyIsKubeProxys(t *testing.T) {
	got := string(serviceHealthBody(types.NamespacedName{Namespace: "default", Name: "loadbalancer"}, 1, true))
	want := "{\n" +
		"\t\"service\": {\n" +
		"\t\t\"namespace\": \"default\",\n" +
		"\t\t\"name\": \"loadbalancer\"\n" +
		"\t},\n" +
		"\t\"localEndpoints\": 1,\n" +
		"\t\"serviceProxyHealthy\": true\n" +
		"}"
	if got != want {
		t.Errorf("body:\n got %q\nwant %q", got, want)
	}
}

func TestServiceHealthLocalEndpoints(t *testing.T) {
	s, health, clock := newTestServiceHealth(t, nil)
	name := types.NamespacedName{Namespace: "default", Name: "loadbalancer"}
	port := freePort(t)
	s.SyncServices(map[types.NamespacedName]uint16{name: port})
	base := "http://" + hostPort("127.0.0.1", port)

	// Open but no local endpoint yet.
	checkServiceAnswer(t, base+"/healthz", name, http.StatusServiceUnavailable, 0, true)

	s.SyncEndpoints(map[types.NamespacedName]int{name: 1})
	checkServiceAnswer(t, base+"/healthz", name, http.StatusOK, 1, true)
	// Any path answers the same, as kube-proxy's does.
	checkServiceAnswer(t, base+"/some/other/path?x=1", name, http.StatusOK, 1, true)

	s.SyncEndpoints(map[types.NamespacedName]int{name: 0})
	checkServiceAnswer(t, base+"/healthz", name, http.StatusServiceUnavailable, 0, true)

	s.SyncEndpoints(map[types.NamespacedName]int{name: 3})
	checkServiceAnswer(t, base+"/healthz", name, http.StatusOK, 3, true)

	// Missing from the map means no local endpoint.
	s.SyncEndpoints(map[types.NamespacedName]int{})
	checkServiceAnswer(t, base+"/healthz", name, http.StatusServiceUnavailable, 0, true)

	// A proxier that stopped keeping up fails the check even with endpoints.
	s.SyncEndpoints(map[types.NamespacedName]int{name: 1})
	health.QueuedUpdate()
	clock.Step(2 * syncPeriod)
	checkServiceAnswer(t, base+"/healthz", name, http.StatusServiceUnavailable, 1, false)
	health.Updated()
	checkServiceAnswer(t, base+"/healthz", name, http.StatusOK, 1, true)

	// The node's own eligibility is for /healthz on 10256, not for Services.
	health.SyncNode(nil)
	checkServiceAnswer(t, base+"/healthz", name, http.StatusOK, 1, true)
}

func TestServiceHealthOpensAndClosesWithoutDisturbingOthers(t *testing.T) {
	s, _, _ := newTestServiceHealth(t, nil)
	local := types.NamespacedName{Namespace: "default", Name: "local"}
	steady := types.NamespacedName{Namespace: "other", Name: "steady"}
	localPort, steadyPort := freePort(t), freePort(t)
	localAddr, steadyAddr := hostPort("127.0.0.1", localPort), hostPort("127.0.0.1", steadyPort)

	both := map[types.NamespacedName]uint16{local: localPort, steady: steadyPort}
	s.SyncServices(both)
	s.SyncEndpoints(map[types.NamespacedName]int{local: 1, steady: 2})
	checkServiceAnswer(t, "http://"+localAddr+"/healthz", local, http.StatusOK, 1, true)

	// A kept-alive connection to the steady Service survives the other's
	// changes only if its listener and server are left alone.
	kept := dialKept(t, steadyAddr)
	if code, err := kept.get(t, "/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("steady Service first answer: %d, %v", code, err)
	}

	// externalTrafficPolicy Local -> Cluster: the Service leaves the map.
	s.SyncServices(map[types.NamespacedName]uint16{steady: steadyPort})
	if !refused(t, localAddr) {
		t.Errorf("%s still accepts connections after its Service left", localAddr)
	}
	if code, err := kept.get(t, "/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("steady Service after the other closed: %d, %v (its listener was disturbed)", code, err)
	}

	// Cluster -> Local again: the port answers again, with no endpoint until
	// the next SyncEndpoints says so.
	s.SyncServices(both)
	checkServiceAnswer(t, "http://"+localAddr+"/healthz", local, http.StatusServiceUnavailable, 0, true)
	if code, err := kept.get(t, "/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("steady Service after the other reopened: %d, %v", code, err)
	}

	// A changed healthCheckNodePort moves the listener.
	newPort := freePort(t)
	s.SyncServices(map[types.NamespacedName]uint16{local: newPort, steady: steadyPort})
	if !refused(t, localAddr) {
		t.Errorf("old port %s still open after the health check port moved", localAddr)
	}
	checkServiceAnswer(t, "http://"+hostPort("127.0.0.1", newPort)+"/healthz", local, http.StatusServiceUnavailable, 0, true)

	s.Close()
	for _, addr := range []string{steadyAddr, hostPort("127.0.0.1", newPort)} {
		if !refused(t, addr) {
			t.Errorf("%s still open after Close", addr)
		}
	}
}

func TestServiceHealthPortInUseIsReportedAndRetried(t *testing.T) {
	recorder := record.NewFakeRecorder(10)
	s, _, _ := newTestServiceHealth(t, recorder, WithNodeName("node-a"))
	name := types.NamespacedName{Namespace: "default", Name: "loadbalancer"}

	squatter, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(squatter.Addr().(*net.TCPAddr).Port)
	ports := map[types.NamespacedName]uint16{name: port}

	if err := s.SyncServices(ports); err != nil {
		t.Fatalf("SyncServices = %v; one Service's port must not fail the sync", err)
	}
	select {
	case event := <-recorder.Events:
		for _, want := range []string{"Warning", ReasonFailedToStartServiceHealthcheck, "node node-a", `"default/loadbalancer"`, "address already in use"} {
			if !strings.Contains(event, want) {
				t.Errorf("event %q lacks %q", event, want)
			}
		}
	default:
		t.Fatal("no event recorded for a port already in use")
	}

	// Still in use: reported again on the next sync.
	s.SyncServices(ports)
	if len(recorder.Events) != 1 {
		t.Errorf("%d events after the second failed sync, want 1", len(recorder.Events))
	}
	<-recorder.Events

	// Freed: the next sync opens it, and nothing is reported.
	squatter.Close()
	s.SyncServices(ports)
	s.SyncEndpoints(map[types.NamespacedName]int{name: 1})
	checkServiceAnswer(t, "http://"+hostPort("127.0.0.1", port)+"/healthz", name, http.StatusOK, 1, true)
	if len(recorder.Events) != 0 {
		t.Errorf("unexpected event after the port was freed: %q", <-recorder.Events)
	}
}

func TestServiceHealthSkipsUnallocatedPort(t *testing.T) {
	recorder := record.NewFakeRecorder(10)
	s, _, _ := newTestServiceHealth(t, recorder)
	name := types.NamespacedName{Namespace: "default", Name: "loadbalancer"}
	s.SyncServices(map[types.NamespacedName]uint16{name: 0})
	s.lock.RLock()
	open := len(s.services)
	s.lock.RUnlock()
	if open != 0 || len(recorder.Events) != 0 {
		t.Errorf("port 0: %d listeners, %d events; want none", open, len(recorder.Events))
	}
}

func TestServiceHealthListensOnMatchingNodeAddressesOnly(t *testing.T) {
	name := types.NamespacedName{Namespace: "default", Name: "loadbalancer"}

	// 192.0.2.10 is outside the prefix; 127.0.0.1 is listed twice.
	s, _, _ := newTestServiceHealth(t, nil, onlyAddresses("127.0.0.1", "192.0.2.10", "127.0.0.1"))
	port := freePort(t)
	s.SyncServices(map[types.NamespacedName]uint16{name: port})
	checkServiceAnswer(t, "http://"+hostPort("127.0.0.1", port)+"/", name, http.StatusServiceUnavailable, 0, true)
	// 127.0.0.2 reaches the loopback interface too, but is not a listed node
	// address: a wildcard listener would answer it, ours must not.
	if !refused(t, hostPort("127.0.0.2", port)) {
		t.Errorf("127.0.0.2:%d accepted: listening beyond the node addresses", port)
	}
	s.Close()

	// Both loopback addresses listed: both answer.
	s2, _, _ := newTestServiceHealth(t, nil, onlyAddresses("127.0.0.1", "127.0.0.2"))
	s2.SyncServices(map[types.NamespacedName]uint16{name: port})
	for _, host := range []string{"127.0.0.1", "127.0.0.2"} {
		checkServiceAnswer(t, "http://"+hostPort(host, port)+"/", name, http.StatusServiceUnavailable, 0, true)
	}
}

func TestServiceHealthRealInterfaceAddresses(t *testing.T) {
	// The default address source reads the interfaces; lo holds 127.0.0.1.
	clock := clocktesting.NewFakeClock(start)
	s := NewServiceHealthServer(loopback, nil, NewProxyHealth(syncPeriod, clock))
	t.Cleanup(s.Close)
	name := types.NamespacedName{Namespace: "default", Name: "loadbalancer"}
	port := freePort(t)
	s.SyncServices(map[types.NamespacedName]uint16{name: port})
	checkServiceAnswer(t, "http://"+hostPort("127.0.0.1", port)+"/healthz", name, http.StatusServiceUnavailable, 0, true)
}

func TestServiceHealthSilentClient(t *testing.T) {
	limits := DefaultServerLimits
	limits.ReadHeaderTimeout = 200 * time.Millisecond
	limits.ReadTimeout = 200 * time.Millisecond
	limits.MaxConnections = 2
	s, _, _ := newTestServiceHealth(t, nil, WithServerLimits(limits))
	name := types.NamespacedName{Namespace: "default", Name: "loadbalancer"}
	port := freePort(t)
	addr := hostPort("127.0.0.1", port)
	s.SyncServices(map[types.NamespacedName]uint16{name: port})
	s.SyncEndpoints(map[types.NamespacedName]int{name: 1})

	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	// The silent client does not hold up a probe.
	checkServiceAnswer(t, "http://"+addr+"/healthz", name, http.StatusOK, 1, true)

	// And the server hangs up on it: the read ends instead of waiting for ever
	// (the deadline only guards the test itself).
	silent.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 1)
	if _, err := silent.Read(buf); err == nil {
		t.Fatal("silent client got data, want the connection closed")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("server never closed the silent connection")
	}
}

func TestServiceHealthConnectionLimitFreesSlotOfSilentClient(t *testing.T) {
	// With room for one connection, a silent client is shed when the probe
	// arrives; the probe is served.
	limits := DefaultServerLimits
	limits.ReadHeaderTimeout = 200 * time.Millisecond
	limits.MaxConnections = 1
	s, _, _ := newTestServiceHealth(t, nil, WithServerLimits(limits))
	name := types.NamespacedName{Namespace: "default", Name: "loadbalancer"}
	port := freePort(t)
	addr := hostPort("127.0.0.1", port)
	s.SyncServices(map[types.NamespacedName]uint16{name: port})

	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	checkServiceAnswer(t, "http://"+addr+"/healthz", name, http.StatusServiceUnavailable, 0, true)
}

// An IPv4-only --nodeport-addresses leaves IPv6 on all addresses (the
// family's ::/0, as in kube-proxy). A node's IPv6 link-local address cannot
// be bound without its zone: it is left out, and the Service's health check
// still opens on the others (conformance: "should fail health check node
// port if there are only terminating endpoints" found every listener
// failing on fe80::).
func TestServiceHealthLeavesOutIPv6LinkLocal(t *testing.T) {
	clock := clocktesting.NewFakeClock(start)
	health := NewProxyHealth(syncPeriod, clock)
	health.Updated()
	prefixes := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::/0")}
	s := NewServiceHealthServer(prefixes, nil, health, onlyAddresses("127.0.0.1", "fe80::874:c9ff:feb6:9f1e"))
	t.Cleanup(s.Close)
	name := types.NamespacedName{Namespace: "default", Name: "loadbalancer"}
	port := freePort(t)
	if err := s.SyncServices(map[types.NamespacedName]uint16{name: port}); err != nil {
		t.Fatalf("SyncServices: %v", err)
	}
	checkServiceAnswer(t, "http://"+hostPort("127.0.0.1", port)+"/", name, http.StatusServiceUnavailable, 0, true)
}
