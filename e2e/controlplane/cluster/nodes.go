package cluster

import (
	"context"
	"fmt"
	"net"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ZoneLabel is the well-known topology label the proxier reads for topology
// hints and trafficDistribution.
const ZoneLabel = "topology.kubernetes.io/zone"

// Node is a node of the end-to-end topology as the API server should see it.
type Node struct {
	Name        string
	InternalIP  net.IP
	InternalIP6 net.IP // the second InternalIP of a dual-stack node; nil on a single-stack one
	Zone        string
	PodCIDRs    []string // spec.podCIDRs, set once at creation (the API server refuses a later change)
}

// DefaultNodes are the two dual-stack nodes of the end-to-end topology, on
// documentation ranges so no packet to them can leave the test's namespaces.
// node2 has no podCIDRs at creation: a scenario starts its daemon with
// --detect-local-mode NodeCIDR before the pod CIDRs exist, then sets them
// (spec.podCIDRs can be set only once).
var DefaultNodes = []Node{
	{Name: "node1", InternalIP: net.ParseIP("198.51.100.1"), InternalIP6: net.ParseIP("2001:db8:1::1"), Zone: "zone-a",
		PodCIDRs: []string{"10.244.1.0/24", "2001:db8:244:1::/64"}},
	{Name: "node2", InternalIP: net.ParseIP("198.51.100.2"), InternalIP6: net.ParseIP("2001:db8:1::2"), Zone: "zone-b"},
}

// ParseNode reads NAME=IP[,IPV6][@ZONE], as given on e2ectl's command line.
func ParseNode(s string) (Node, error) {
	name, rest, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return Node{}, fmt.Errorf("parse node %q: want NAME=IP[,IPV6][@ZONE]", s)
	}
	ips, zone, _ := strings.Cut(rest, "@")
	ipText, ip6Text, dual := strings.Cut(ips, ",")
	ip := net.ParseIP(ipText)
	if ip == nil {
		return Node{}, fmt.Errorf("parse node %q: %q is not an IP address", s, ipText)
	}
	n := Node{Name: name, InternalIP: ip, Zone: zone}
	if dual {
		n.InternalIP6 = net.ParseIP(ip6Text)
		if n.InternalIP6 == nil || n.InternalIP6.To4() != nil || ip.To4() == nil {
			return Node{}, fmt.Errorf("parse node %q: want an IPv4 then an IPv6 address, got %q and %q", s, ipText, ip6Text)
		}
	}
	return n, nil
}

// NodeObject is the Node a kubelet would register: hostname and zone labels,
// the InternalIP address the proxier binds NodePorts on, and Ready.
func NodeObject(n Node) *v1.Node {
	labels := map[string]string{"kubernetes.io/hostname": n.Name, "kubernetes.io/os": "linux"}
	if n.Zone != "" {
		labels[ZoneLabel] = n.Zone
	}
	addresses := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: n.InternalIP.String()}}
	if n.InternalIP6 != nil {
		addresses = append(addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: n.InternalIP6.String()})
	}
	addresses = append(addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: n.Name})
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels},
		Status: v1.NodeStatus{
			Addresses: addresses,
			Conditions: []v1.NodeCondition{{
				Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
				Message:            "registered by e2ectl; no kubelet runs in the end-to-end cluster",
				LastHeartbeatTime:  metav1.Now(),
				LastTransitionTime: metav1.Now(),
			}},
		},
	}
	if len(n.PodCIDRs) > 0 {
		node.Spec.PodCIDR = n.PodCIDRs[0]
		node.Spec.PodCIDRs = n.PodCIDRs
	}
	return node
}

// EnsureNodes creates each node, or brings an existing one's labels and
// status to what NodeObject says, so reruns against one API server converge.
func EnsureNodes(ctx context.Context, cs kubernetes.Interface, nodes []Node) error {
	for _, n := range nodes {
		want := NodeObject(n)
		got, err := cs.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			if got, err = cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err == nil {
				got.Labels = want.Labels
				got, err = cs.CoreV1().Nodes().Update(ctx, got, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			return fmt.Errorf("create node %s (%s): %w", n.Name, n.InternalIP, err)
		}
		// Status is a subresource: whatever the create carried may be dropped,
		// so write it explicitly, as a kubelet does after registering.
		got.Status = want.Status
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("set status of node %s (%s): %w", n.Name, n.InternalIP, err)
		}
	}
	return nil
}
