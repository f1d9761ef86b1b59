package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/ours"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

// hostileChildEnv makes the test binary run runHostileServiceChild instead
// of the tests (TestMain), with the memory limit in bytes as its value.
const hostileChildEnv = "IPVSPROXY_TEST_HOSTILE_SERVICE_LIMIT"

// The hostile Service: 10,000 ports, 1,000 EndpointSlices of 100 endpoints
// listing every port (as the EndpointSlice controller writes them for
// 100,000 pods), and a 256 KiB scheduler annotation.
const (
	hostilePorts      = 10000
	hostileSlices     = 1000
	hostileEndpoints  = 100
	hostileAnnotation = 256 << 10
	// Services beside it, 10 endpoints each: they must stay served.
	bystanders = 2000
)

// hostileResult is what the child reports.
type hostileResult struct {
	PeakRSS            int64    `json:"peakRSS"`
	Bystanders         int      `json:"bystanders"`
	BystandersServed   int      `json:"bystandersServed"`
	HostileVirtual     int      `json:"hostileVirtualServers"`
	HostileProblems    []string `json:"hostileProblems"`
	LongestProblemText int      `json:"longestProblemText"`
}

// daemonSetMemory reads deploy/base's DaemonSet: the container's memory
// limit and its GOMEMLIMIT.
func daemonSetMemory(t *testing.T) (limit, goMemLimit int64) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "base", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.Unmarshal(data, &ds); err != nil {
		t.Fatal(err)
	}
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name != "ipvsproxy" {
			continue
		}
		limit = c.Resources.Limits.Memory().Value()
		for _, e := range c.Env {
			if e.Name == "GOMEMLIMIT" {
				goMemLimit, err = parseBytes(e.Value)
				if err != nil {
					t.Fatalf("GOMEMLIMIT %q: %v", e.Value, err)
				}
			}
		}
	}
	if limit == 0 || goMemLimit == 0 {
		t.Fatalf("no memory limit (%d) or GOMEMLIMIT (%d) in deploy/base/daemonset.yaml", limit, goMemLimit)
	}
	return limit, goMemLimit
}

// parseBytes reads GOMEMLIMIT's syntax: a number with an optional B, KiB,
// MiB or GiB.
func parseBytes(s string) (int64, error) {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}, {"", 0}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			return v << u.shift, err
		}
	}
	return 0, fmt.Errorf("no unit")
}

// A tenant's hostile Service costs every node bounded memory and takes
// nothing from the other Services: in a child process with the DaemonSet's
// GOMEMLIMIT, on the fakes, the Service and its slices go through the
// informer's transform into the proxier beside 2,000 Services, which sync
// and churn; the child's peak RSS stays within the DaemonSet's memory limit
// (deploy/base), every other Service is programmed, the hostile one is
// refused naming its cap, and no problem kept of it is longer than 2 KiB.
func TestAHostileServiceStaysWithinTheDaemonSetMemoryLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Service of 10,000 ports and 1,000 EndpointSlices")
	}
	limit, goMemLimit := daemonSetMemory(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", hostileChildEnv, limit), fmt.Sprintf("GOMEMLIMIT=%d", goMemLimit), "GOGC=25")
	out, err := cmd.CombinedOutput()
	var res hostileResult
	found := false
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if j, ok := strings.CutPrefix(sc.Text(), "RESULT "); ok {
			found = json.Unmarshal([]byte(j), &res) == nil
		}
	}
	if err != nil || !found {
		t.Fatalf("the child failed (%v):\n%s", err, tail(string(out), 4000))
	}
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	t.Logf("peak RSS %.1f MiB of the DaemonSet's %.0f MiB; %d of %d other Services served; the hostile one: %d virtual servers, %q",
		mib(res.PeakRSS), mib(limit), res.BystandersServed, res.Bystanders, res.HostileVirtual, res.HostileProblems)
	if res.PeakRSS > limit {
		t.Errorf("peak RSS %.1f MiB, beyond the DaemonSet's memory limit of %.0f MiB", mib(res.PeakRSS), mib(limit))
	}
	if res.BystandersServed != res.Bystanders {
		t.Errorf("%d of %d other Services served beside the hostile one", res.BystandersServed, res.Bystanders)
	}
	if res.HostileVirtual != 0 {
		t.Errorf("the hostile Service has %d virtual servers, want none", res.HostileVirtual)
	}
	if !strings.Contains(strings.Join(res.HostileProblems, "\n"), "--ipvs-max-real-servers-per-service") {
		t.Errorf("the hostile Service's problems %q do not name the cap it is beyond", res.HostileProblems)
	}
	if res.LongestProblemText > 2048 {
		t.Errorf("a problem kept of the hostile Service is %d bytes", res.LongestProblemText)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// runHostileServiceChild is the child's whole run; it exits 3 as soon as its
// RSS passes limit (so a regression fails fast instead of taking the
// machine), else prints RESULT and exits 0.
func runHostileServiceChild(limit int64) {
	klog.SetLogger(logr.Discard())
	go func() {
		for {
			if rss := statusBytes("VmRSS"); rss > limit {
				fmt.Printf("RSS %d bytes, beyond the limit of %d\n", rss, limit)
				os.Exit(3)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	fail := func(format string, args ...any) {
		fmt.Printf(format+"\n", args...)
		os.Exit(2)
	}
	s := shape.Shape{Services: bystanders, Endpoints: 10}
	k := ours.FakeKernel(netif.NewFake(owned.DummyInterface))
	p, err := proxier.New(ours.Config(s), shape.NodeName, k, nil)
	if err != nil {
		fail("%v", err)
	}
	tr := p.Tracker()
	// As the informers hand them over: transformed one at a time, the
	// decoded object dropped.
	cached := func(obj any) any {
		c, err := trimCached(obj)
		if err != nil {
			fail("%v", err)
		}
		return c
	}
	for i := range bystanders {
		tr.SetCompactService(cached(s.Service(i)).(*ipvsproxy.Service))
		for _, sl := range s.Slices(i, s.Endpoints, 0) {
			tr.SetSlice(cached(sl).(*ipvsproxy.EndpointSlice))
		}
	}
	if res := p.Sync(); res.Err() != nil {
		fail("sync: %v", res.Err())
	}
	tr.SetCompactService(cached(hostileService()).(*ipvsproxy.Service))
	for i := range hostileSlices {
		tr.SetSlice(cached(hostileSlice(i, 0)).(*ipvsproxy.EndpointSlice))
	}
	p.Sync()
	// Churn: some of the hostile slices and some others change.
	for round := 1; round <= 3; round++ {
		for i := range 10 {
			tr.SetSlice(cached(hostileSlice(i*97%hostileSlices, round)).(*ipvsproxy.EndpointSlice))
			for _, sl := range s.Slices(i*round, s.Endpoints+round%2, round) {
				tr.SetSlice(cached(sl).(*ipvsproxy.EndpointSlice))
			}
		}
		if res := p.Sync(); res.Err() != nil {
			fail("sync: %v", res.Err())
		}
	}
	runtime.GC()

	res := hostileResult{Bystanders: bystanders}
	served := map[string]bool{}
	for _, vs := range p.Snapshot().VirtualServers {
		if vs.Kind == ipvsproxy.KindClusterIP.String() {
			served[vs.Service] = true
		}
	}
	vss, err := k.IPVS.VirtualServers()
	if err != nil {
		fail("%v", err)
	}
	programmed := map[string]bool{}
	for _, vs := range vss {
		programmed[vs.Address.String()] = true
	}
	for i := range bystanders {
		svc := s.Service(i)
		if served[svc.Namespace+"/"+svc.Name] && programmed[svc.Spec.ClusterIP] {
			res.BystandersServed++
		}
	}
	for _, vs := range p.Snapshot().VirtualServers {
		if vs.Service == "hostile/hostile" {
			res.HostileVirtual++
		}
	}
	for _, sum := range p.Snapshot().Services {
		if sum.Name != "hostile/hostile" {
			continue
		}
		for _, pr := range sum.Problems {
			res.HostileProblems = append(res.HostileProblems, pr)
			res.LongestProblemText = max(res.LongestProblemText, len(pr))
		}
	}
	res.PeakRSS = statusBytes("VmHWM")
	out, _ := json.Marshal(res)
	fmt.Printf("RESULT %s\n", out)
	os.Exit(0)
}

// statusBytes reads a kB field of /proc/self/status in bytes.
func statusBytes(field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func hostileService() *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "hostile", Name: "hostile", UID: "hostile",
			CreationTimestamp: metav1.Unix(1600000000, 0), // older than every other
			Annotations:       map[string]string{ipvsproxy.AnnotationScheduler: strings.Repeat("\x01", hostileAnnotation)}},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: "10.111.0.1", ClusterIPs: []string{"10.111.0.1"}},
	}
	for i := range hostilePorts {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: int32(1 + i), Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(int32(1 + i))})
	}
	return svc
}

// hostileSlice is the hostile Service's slice i: 100 endpoints, every port;
// gen moves one endpoint.
func hostileSlice(i, gen int) *discovery.EndpointSlice {
	sl := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "hostile", Name: fmt.Sprintf("hostile-%d", i), Labels: map[string]string{discovery.LabelServiceName: "hostile"}},
		AddressType: discovery.AddressTypeIPv4,
	}
	tcp := v1.ProtocolTCP
	for p := range hostilePorts {
		name, port := fmt.Sprintf("p%d", p), int32(1+p)
		sl.Ports = append(sl.Ports, discovery.EndpointPort{Name: &name, Port: &port, Protocol: &tcp})
	}
	ready := true
	node := "node2"
	for e := range hostileEndpoints {
		n := i*hostileEndpoints + e
		if e == 0 {
			n += gen * 1_000_000
		}
		sl.Endpoints = append(sl.Endpoints, discovery.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 128+n>>16&127, n>>8&255, n&255)},
			Conditions: discovery.EndpointConditions{Ready: &ready},
			NodeName:   &node,
		})
	}
	return sl
}
