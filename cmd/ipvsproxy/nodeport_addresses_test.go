package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/kubeapi/kubeapitest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestNodePortAddressesPerFamily(t *testing.T) {
	for _, c := range []struct {
		value, want string
	}{
		{"", "[]"},
		{"all", "[]"},
		{"primary", "[]"}, // resolved at start-up
		// An IPv4-only list leaves IPv6 NodePorts on every address, as in kube-proxy.
		{"198.51.100.0/24", "[198.51.100.0/24 ::/0]"},
		{"2001:db8::/64", "[2001:db8::/64 0.0.0.0/0]"},
		{"198.51.100.0/24,2001:db8::/64", "[198.51.100.0/24 2001:db8::/64]"},
	} {
		got, err := parseNodePortAddresses(c.value)
		if err != nil || fmt.Sprint(got) != c.want {
			t.Errorf("%q: got %v %v, want %s", c.value, got, err, c.want)
		}
	}
	if _, err := parseNodePortAddresses("localhost"); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("localhost: got %v", err)
	}
}

func TestPrimaryNodePortAddresses(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
		{Type: v1.NodeHostName, Address: "node1"},
		{Type: v1.NodeExternalIP, Address: "203.0.113.7"},
		{Type: v1.NodeExternalIP, Address: "2001:db8::7"},
		{Type: v1.NodeInternalIP, Address: "198.51.100.1"},
		{Type: v1.NodeInternalIP, Address: "198.51.100.2"},
	}}}
	// IPv4: the first InternalIP; IPv6 has none, so its first ExternalIP.
	if got := fmt.Sprint(primaryNodeAddresses(node)); got != "[198.51.100.1 2001:db8::7]" {
		t.Errorf("primary addresses %s", got)
	}
	client := fake.NewClientset(node)
	got, err := resolvePrimaryNodePortAddresses(context.Background(), kubeapitest.FromClientset(client), "node1", time.Second)
	if err != nil || fmt.Sprint(got) != "[198.51.100.1/32 2001:db8::7/128]" {
		t.Errorf("resolved %v %v", got, err)
	}
	if _, err := resolvePrimaryNodePortAddresses(context.Background(), kubeapitest.FromClientset(client), "node9", 1500*time.Millisecond); err == nil {
		t.Error("a missing Node resolved")
	}
}
