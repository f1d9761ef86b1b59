package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/kubeapi/kubeapitest"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/sysctl"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func addrs(s ...string) (out []netip.Addr) {
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func TestFamiliesOfHostAddresses(t *testing.T) {
	for _, c := range []struct {
		in   []netip.Addr
		want string
	}{
		{addrs("127.0.0.1", "::1", "fe80::1"), "[IPv4]"},
		{addrs("198.51.100.1", "fe80::1"), "[IPv4]"},
		{addrs("2001:db8::1"), "[IPv6]"},
		{addrs("198.51.100.1", "2001:db8::1"), "[IPv4 IPv6]"},
	} {
		if got := sprint(familiesOf(c.in)); got != c.want {
			t.Errorf("familiesOf(%v) = %s, want %s", c.in, got, c.want)
		}
	}
}

func dualStackNode() *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node1"},
		Spec:       v1.NodeSpec{PodCIDRs: []string{"2001:db8:244:1::/64", "10.244.1.0/24"}},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
			{Type: v1.NodeHostName, Address: "node1"},
			{Type: v1.NodeInternalIP, Address: "198.51.100.1"},
			{Type: v1.NodeInternalIP, Address: "2001:db8:1::1"},
		}},
	}
}

// auto follows what the cluster serves, not the host's addresses: an
// IPv4-only cluster on a host that SLAAC gave a global IPv6 address proxies
// IPv4 only; a dual-stack Node proxies both, its primary (first InternalIP)
// first; a Node that lists nothing leaves the Service ranges; nothing at all
// falls back to the host.
func TestAutoFamiliesFollowTheCluster(t *testing.T) {
	ipv4Only := &v1.Node{Spec: v1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24"}},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "198.51.100.1"}}}}
	ipv6Primary := dualStackNode()
	ipv6Primary.Status.Addresses[1], ipv6Primary.Status.Addresses[2] = ipv6Primary.Status.Addresses[2], ipv6Primary.Status.Addresses[1]
	hostBoth := addrs("198.51.100.1", "2001:db8:1::1", "fe80::1")
	all := func(v1.IPFamily) error { return nil }
	for _, c := range []struct {
		name     string
		evidence clusterEvidence
		host     []netip.Addr
		want     string
		why      string
	}{
		{"IPv4-only cluster, host with a global IPv6 address", evidenceOf(ipv4Only, nil), hostBoth, "[IPv4]", "Node InternalIPs [198.51.100.1]"},
		{"dual-stack Node", evidenceOf(dualStackNode(), nil), addrs("198.51.100.1"), "[IPv4 IPv6]", "Node podCIDRs"},
		{"IPv6 primary", evidenceOf(ipv6Primary, nil), hostBoth, "[IPv6 IPv4]", "Node InternalIPs"},
		{"only Service ranges", evidenceOf(&v1.Node{}, []netip.Prefix{netip.MustParsePrefix("2001:db8:96::/112")}), hostBoth, "[IPv6]", "Service ranges"},
		{"no evidence: the host", evidenceOf(nil, nil), hostBoth, "[IPv4 IPv6]", "host's global addresses"},
	} {
		got, why, err := chooseFamilies("auto", c.evidence, c.host, all)
		if err != nil || sprint(got) != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%s: got %v (%q, %v), want %s because of %q", c.name, got, why, err, c.want, c.why)
		}
	}
}

// A family the kernel cannot proxy is a clear answer: auto leaves it out
// (saying why) and keeps the other; an explicit list naming it is an error
// naming the reason; nothing left is an error, not a silent empty proxy.
func TestFamilyWithoutKernelSupport(t *testing.T) {
	noIPv6 := func(f v1.IPFamily) error {
		if f == v1.IPv6Protocol {
			return fmt.Errorf("IPv6 %w (net.ipv6.conf.all.disable_ipv6=1)", errFamilyDisabled)
		}
		return nil
	}
	got, why, err := chooseFamilies("auto", evidenceOf(dualStackNode(), nil), nil, noIPv6)
	if err != nil || sprint(got) != "[IPv4]" || !strings.Contains(why, "IPv6 not proxied: IPv6 disabled in the kernel") {
		t.Errorf("auto on a node without IPv6: %v %q %v", got, why, err)
	}
	if _, _, err := chooseFamilies("IPv4,IPv6", clusterEvidence{}, nil, noIPv6); err == nil || !strings.Contains(err.Error(), "cannot proxy IPv6: IPv6 disabled") {
		t.Errorf("explicit IPv6 on a node without it: %v", err)
	}
	onlyIPv6 := &v1.Node{Spec: v1.NodeSpec{PodCIDRs: []string{"2001:db8:244:1::/64"}}}
	if _, _, err := chooseFamilies("auto", evidenceOf(onlyIPv6, nil), nil, noIPv6); err == nil || !strings.Contains(err.Error(), "no family this node can proxy") {
		t.Errorf("an IPv6-only cluster on a node without IPv6: %v", err)
	}
	if _, _, err := chooseFamilies("IPv5", clusterEvidence{}, nil, noIPv6); err == nil {
		t.Error("IPv5 accepted")
	}
}

// The kernel check reads IPv6's switch: disable_ipv6=1, or no net.ipv6 at
// all (ipv6.disable=1), is refused before any iptables is looked for.
func TestKernelFamilySupportReadsTheIPv6Switch(t *testing.T) {
	for _, c := range []struct {
		values map[string]string
		want   string
	}{
		{map[string]string{"net.ipv6.conf.all.disable_ipv6": "1"}, "disable_ipv6=1"},
		{map[string]string{}, "no net.ipv6.conf.all.disable_ipv6"},
	} {
		err := kernelFamilySupport(sysctl.NewFake(c.values))(v1.IPv6Protocol)
		if !errors.Is(err, errFamilyDisabled) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.values, err, c.want)
		}
	}
}

// run reads the evidence through the API: the Node object and the
// ServiceCIDR objects beside --service-cidrs; a missing Node is waited for
// only up to the timeout.
func TestReadClusterEvidenceFromTheAPI(t *testing.T) {
	client := fake.NewClientset(dualStackNode(), &networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/16", "2001:db8:96::/112"}},
	})
	e := readClusterEvidence(context.Background(), kubeapitest.FromClientset(client), "node1", nil, time.Second)
	if sprint(e.families) != "[IPv4 IPv6]" || !strings.Contains(strings.Join(e.why, ","), "Service ranges [10.96.0.0 2001:db8:96::]") {
		t.Errorf("evidence %v %v", e.families, e.why)
	}
	start := time.Now()
	e = readClusterEvidence(context.Background(), kubeapitest.FromClientset(fake.NewClientset()), "node1", []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}, 1500*time.Millisecond)
	if sprint(e.families) != "[IPv4]" || time.Since(start) > 5*time.Second {
		t.Errorf("without a Node: %v after %v", e.families, time.Since(start))
	}
}

// The ClusterRole grants list and watch on Nodes, not get (deploy/base):
// start-up reads its Node through a list, both for the families and for
// --nodeport-addresses=primary.
func TestNodeReadWithTheDeployedRole(t *testing.T) {
	client := fake.NewClientset(dualStackNode())
	client.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(v1.Resource("nodes"), "node1", errors.New("the ClusterRole has no get"))
	})
	e := readClusterEvidence(context.Background(), kubeapitest.FromClientset(client), "node1", nil, time.Second)
	if sprint(e.families) != "[IPv4 IPv6]" {
		t.Errorf("families without get: %v %v", e.families, e.why)
	}
	prefixes, err := resolvePrimaryNodePortAddresses(context.Background(), kubeapitest.FromClientset(client), "node1", 2*time.Second)
	if err != nil || len(prefixes) != 2 {
		t.Errorf("primary node port addresses without get: %v %v", prefixes, err)
	}
}
