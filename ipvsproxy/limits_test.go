package ipvsproxy

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// A scheduler annotation may be 256 KiB: every node keeps at most 256 bytes
// of it, and the problem saying it is no scheduler quotes at most 64 (%q
// made each byte of it up to four).
func TestASchedulerAnnotationOf256KiBCostsAFewHundredBytes(t *testing.T) {
	for _, annotation := range []string{AnnotationScheduler, AnnotationSchedulerFlags} {
		svc := servicetest.Service("web", "10.96.0.10")
		svc.Annotations = map[string]string{annotation: strings.Repeat("\x01", 256<<10)}
		kept := CompactService(svc).ToService().Annotations[annotation]
		if len(kept) > 300 {
			t.Errorf("%s: %d bytes kept of 256 KiB", annotation, len(kept))
		}
		st := BuildService(CompactService(svc).ToService(), nil, NodeInfo{Name: servicetest.ThisNode}, testConfig())
		if len(st.Problems) != 1 || st.Problems[0].Reason != ReasonInvalidService {
			t.Fatalf("%s: problems %v, want one InvalidService", annotation, st.Problems)
		}
		if n := len(st.Problems[0].Message); n > 512 {
			t.Errorf("%s: the problem is %d bytes: %.200s…", annotation, n, st.Problems[0].Message)
		}
		if len(st.VirtualServers) != 1 || st.VirtualServers[0].Scheduler != testConfig().Scheduler {
			t.Errorf("%s: the Service is not served with the default scheduler: %+v", annotation, st.VirtualServers)
		}
	}
}

// A Service's problems are at most maxProblems, each message at most
// maxProblemMessage bytes; the last says how many more there were.
func TestAServicesProblemsAreBounded(t *testing.T) {
	svc := servicetest.Service("web", "10.96.0.10")
	svc.Spec.Ports = nil
	for i := range 1000 {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: strings.Repeat("x", 2000) + fmt.Sprint(i), Port: 0, Protocol: v1.ProtocolTCP})
	}
	st := BuildService(svc, nil, NodeInfo{Name: servicetest.ThisNode}, testConfig())
	if len(st.Problems) != maxProblems {
		t.Fatalf("%d problems, want %d", len(st.Problems), maxProblems)
	}
	for _, p := range st.Problems {
		if len(p.Message) > maxProblemMessage {
			t.Fatalf("a problem of %d bytes", len(p.Message))
		}
	}
	if last := st.Problems[maxProblems-1].Message; !strings.HasPrefix(last, fmt.Sprintf("%d more problems", 1000-maxProblems+1)) {
		t.Errorf("the last problem %.100q does not say how many more there were", last)
	}
}

// A Service of 10,000 ports whose 1,000 EndpointSlices list them all for 100
// endpoints each would be a billion endpoint ports: it is refused from its
// size, before its endpoints or virtual servers are made, naming the cap.
func TestAServiceBeyondItsCapsIsRefusedBeforeItIsBuilt(t *testing.T) {
	svc := servicetest.Service("huge", "10.96.0.10")
	svc.Spec.Ports = nil
	for i := range 10000 {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: int32(i + 1), Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)})
	}
	var eps []string
	for e := range 100 {
		eps = append(eps, fmt.Sprintf("10.244.1.%d@node2", e+1))
	}
	one := CompactEndpointSlice(servicetest.Slice(svc, "huge-0", 8080, eps...))
	one.Ports = nil
	for i := range 10000 {
		one.Ports = append(one.Ports, SlicePort{Name: fmt.Sprintf("p%d", i), Protocol: v1.ProtocolTCP, Port: int32(i + 1), HasPort: true})
	}
	slices := make([]*EndpointSlice, 1000)
	for i := range slices {
		s := *one
		s.Name = fmt.Sprintf("huge-%d", i)
		slices[i] = &s
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	st := BuildService(svc, slices, NodeInfo{Name: servicetest.ThisNode}, testConfig())
	runtime.ReadMemStats(&after)
	if len(st.VirtualServers) != 0 || len(st.Problems) != 1 || st.Problems[0].Reason != ReasonServiceTooLarge || !strings.Contains(st.Problems[0].Message, "--ipvs-max-real-servers-per-service") {
		t.Fatalf("%d virtual servers, problems %v; want none and one ServiceTooLarge naming --ipvs-max-real-servers-per-service", len(st.VirtualServers), st.Problems)
	}
	// Its 10,000 ports are read (a few hundred bytes each); built, its
	// billion endpoint ports would be tens of gigabytes.
	if n := after.TotalAlloc - before.TotalAlloc; n > 32<<20 {
		t.Errorf("refusing it allocated %d bytes; it must not be built", n)
	}

	// One slice is already a million endpoint ports.
	st = BuildService(svc, slices[:1:1], NodeInfo{Name: servicetest.ThisNode}, testConfig())
	if len(st.VirtualServers) != 0 || len(st.Problems) == 0 || !strings.Contains(st.Problems[len(st.Problems)-1].Message, "--ipvs-max-real-servers-per-service") {
		t.Errorf("one slice: %d virtual servers, problems %v", len(st.VirtualServers), st.Problems)
	}
	// Without endpoints, its ports on two addresses are 20,000 virtual
	// servers, each a member of the ownership record: beyond the members a
	// Service may have in a set.
	svc.Spec.ExternalIPs = []string{"203.0.113.1"}
	st = BuildService(svc, nil, NodeInfo{Name: servicetest.ThisNode}, testConfig())
	if len(st.VirtualServers) != 0 || len(st.Problems) == 0 || !strings.Contains(st.Problems[len(st.Problems)-1].Message, "--ipset-max-elements-per-service") {
		t.Errorf("no slice: %d virtual servers, problems %v; want it refused naming --ipset-max-elements-per-service", len(st.VirtualServers), st.Problems)
	}
}
