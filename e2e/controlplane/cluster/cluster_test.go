package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func echoService() *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "echo", UID: "uid-1"},
		Spec: v1.ServiceSpec{Ports: []v1.ServicePort{
			{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)},
			{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53}, // targetPort unset: the Service port
		}},
	}
}

func mustEndpoints(t *testing.T, specs ...string) []Endpoint {
	t.Helper()
	var eps []Endpoint
	for _, s := range specs {
		ep, err := ParseEndpoint(s)
		if err != nil {
			t.Fatalf("ParseEndpoint(%q): %v", s, err)
		}
		eps = append(eps, ep)
	}
	return eps
}

// The slices must look like the EndpointSlice controller's to the proxier:
// its label selector, per-family slices, target ports, and the conditions
// each lifecycle state maps to.
func TestBuildSlices(t *testing.T) {
	eps := mustEndpoints(t, "10.244.1.5@node1", "10.244.2.7@node2:terminating", "fd00::5@node1:notready", "10.244.1.9")
	slices, err := BuildSlices(echoService(), eps, map[string]string{"node1": "zone-a"}, time.Unix(0, 0))
	if err != nil {
		t.Fatalf("BuildSlices: %v", err)
	}
	var got []string
	for _, s := range slices {
		got = append(got, dumpSlice(s))
	}
	want := []string{
		"echo-e2e-ipv4 IPv4 svc=echo managed-by=e2ectl.ipvsproxy.io owner=echo ports=http/TCP/8080,dns/UDP/53" +
			" [10.244.1.5 node=node1 zone=zone-a ready=true serving=true terminating=false]" +
			" [10.244.2.7 node=node2 zone= ready=false serving=true terminating=true]" +
			" [10.244.1.9 node= zone= ready=true serving=true terminating=false]",
		"echo-e2e-ipv6 IPv6 svc=echo managed-by=e2ectl.ipvsproxy.io owner=echo ports=http/TCP/8080,dns/UDP/53" +
			" [fd00::5 node=node1 zone=zone-a ready=false serving=false terminating=false]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("slices:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestBuildSlicesRejects(t *testing.T) {
	named := echoService()
	named.Spec.Ports[0].TargetPort = intstr.FromString("http")
	for name, tc := range map[string]struct {
		svc *v1.Service
		eps []Endpoint
	}{
		"named target port": {named, mustEndpoints(t, "10.244.1.5@node1")},
		"duplicate address": {echoService(), mustEndpoints(t, "10.244.1.5@node1", "10.244.1.5@node2")},
	} {
		if _, err := BuildSlices(tc.svc, tc.eps, nil, time.Now()); err == nil {
			t.Errorf("%s: BuildSlices succeeded, want an error", name)
		}
	}
}

func TestParseEndpointRejects(t *testing.T) {
	for _, s := range []string{"", "10.244.1", "10.244.1.5@node1:gone", "node1@10.244.1.5",
		"10.244.1.5@node1+zone=zone-a", "10.244.1.5@node1+zones=", "10.244.1.5@node1+zones=a,,b", "10.244.1.5+nodes=n1+nodes=n2"} {
		if ep, err := ParseEndpoint(s); err == nil {
			t.Errorf("ParseEndpoint(%q) = %+v, want an error", s, ep)
		}
	}
}

// Hints are written as the EndpointSlice controller writes them for a
// Service's trafficDistribution, and only on the endpoints given some.
func TestBuildSlicesHints(t *testing.T) {
	eps := mustEndpoints(t, "10.244.1.5@node1+zones=zone-a+nodes=node1", "10.244.2.7@node2:terminating+nodes=node2,node3", "10.244.1.9@node1")
	slices, err := BuildSlices(echoService(), eps, nil, time.Unix(0, 0))
	if err != nil {
		t.Fatalf("BuildSlices: %v", err)
	}
	var got []string
	for _, e := range slices[0].Endpoints {
		h := "none"
		if e.Hints != nil {
			h = fmt.Sprintf("zones=%v nodes=%v", e.Hints.ForZones, e.Hints.ForNodes)
		}
		got = append(got, e.Addresses[0]+" "+h)
	}
	want := []string{"10.244.1.5 zones=[{zone-a}] nodes=[{node1}]", "10.244.2.7 zones=[] nodes=[{node2} {node3}]", "10.244.1.9 none"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("hints:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestStateRoundTrip(t *testing.T) {
	for _, s := range []EndpointState{Ready, NotReady, Terminating, TerminatingNotServing} {
		c, err := s.conditions()
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if got := stateOf(c); got != s {
			t.Errorf("stateOf(conditions(%s)) = %s", s, got)
		}
	}
}

func TestParseNode(t *testing.T) {
	n, err := ParseNode("node3=198.51.100.3@zone-c")
	if err != nil || n.Name != "node3" || n.InternalIP.String() != "198.51.100.3" || n.Zone != "zone-c" {
		t.Errorf("ParseNode = %+v, %v", n, err)
	}
	n, err = ParseNode("node3=198.51.100.3,2001:db8:1::3@zone-c")
	if err != nil || n.InternalIP.String() != "198.51.100.3" || n.InternalIP6.String() != "2001:db8:1::3" || n.Zone != "zone-c" {
		t.Errorf("ParseNode dual-stack = %+v, %v", n, err)
	}
	for _, s := range []string{"node3", "=198.51.100.3", "node3=not-an-ip", "node3=198.51.100.3,198.51.100.4", "node3=2001:db8:1::3,198.51.100.3", "node3=198.51.100.3,x"} {
		if _, err := ParseNode(s); err == nil {
			t.Errorf("ParseNode(%q) succeeded, want an error", s)
		}
	}
}

func TestServiceInfo(t *testing.T) {
	svc := echoService()
	svc.Spec.Type = v1.ServiceTypeLoadBalancer
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "10.96.0.20", []string{"10.96.0.20"}
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	svc.Spec.HealthCheckNodePort = 31999
	svc.Spec.Ports[0].NodePort = 30080
	want := `CLUSTER_IP=10.96.0.20
CLUSTER_IPS=10.96.0.20
EXTERNAL_TRAFFIC_POLICY=Local
HEALTH_CHECK_NODE_PORT=31999
NODE_PORT_DNS=0
NODE_PORT_HTTP=30080
PORT_DNS=53
PORT_HTTP=80
TYPE=LoadBalancer
`
	if got := ServiceInfo(svc); got != want {
		t.Errorf("ServiceInfo:\n%s\nwant:\n%s", got, want)
	}
}

func TestReadManifests(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("kustomization.yaml", "resources: [rbac.yaml]\nnamespace: proxy-system\n")
	write("rbac.yaml", `apiVersion: v1
kind: ServiceAccount
metadata: {name: ipvsproxy}
---
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ipvsproxy}
`)
	write("ds.yaml", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: ipvsproxy, namespace: kube-system}\n")
	objs, err := ReadManifests(dir, "kube-system")
	if err != nil {
		t.Fatalf("ReadManifests: %v", err)
	}
	var got []string
	for _, o := range FilterKinds(objs, RBACKinds) {
		got = append(got, describe(o))
	}
	if want := "ServiceAccount proxy-system/ipvsproxy,ClusterRole ipvsproxy"; strings.Join(got, ",") != want {
		t.Errorf("RBAC objects = %s, want %s", strings.Join(got, ","), want)
	}
	if len(objs) != 3 {
		t.Errorf("read %d objects, want 3 (the DaemonSet too)", len(objs))
	}
}

func dumpSlice(s *discovery.EndpointSlice) string {
	var b strings.Builder
	owner := ""
	if len(s.OwnerReferences) == 1 {
		owner = s.OwnerReferences[0].Name
	}
	b.WriteString(s.Name + " " + string(s.AddressType) + " svc=" + s.Labels[discovery.LabelServiceName] +
		" managed-by=" + s.Labels[discovery.LabelManagedBy] + " owner=" + owner + " ports=")
	for i, p := range s.Ports {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(*p.Name + "/" + string(*p.Protocol) + "/" + strconv.Itoa(int(*p.Port)))
	}
	for _, e := range s.Endpoints {
		str := func(p *string) string {
			if p == nil {
				return ""
			}
			return *p
		}
		bl := func(p *bool) string {
			if p == nil {
				return "nil"
			}
			if *p {
				return "true"
			}
			return "false"
		}
		b.WriteString(" [" + e.Addresses[0] + " node=" + str(e.NodeName) + " zone=" + str(e.Zone) +
			" ready=" + bl(e.Conditions.Ready) + " serving=" + bl(e.Conditions.Serving) +
			" terminating=" + bl(e.Conditions.Terminating) + "]")
	}
	return b.String()
}

func TestNodeObjectDualStack(t *testing.T) {
	n := NodeObject(DefaultNodes[0])
	var internal []string
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			internal = append(internal, a.Address)
		}
	}
	if strings.Join(internal, " ") != "198.51.100.1 2001:db8:1::1" {
		t.Errorf("InternalIPs = %v, want both families", internal)
	}
	if n.Spec.PodCIDR != "10.244.1.0/24" || strings.Join(n.Spec.PodCIDRs, " ") != "10.244.1.0/24 2001:db8:244:1::/64" {
		t.Errorf("podCIDR %q, podCIDRs %v", n.Spec.PodCIDR, n.Spec.PodCIDRs)
	}
	if n2 := NodeObject(DefaultNodes[1]); len(n2.Spec.PodCIDRs) != 0 {
		t.Errorf("node2 has podCIDRs %v at creation, want none", n2.Spec.PodCIDRs)
	}
}
