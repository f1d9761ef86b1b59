package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/kubeapi"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/sysctl"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// clusterEvidence is what the cluster says this node serves: the families of
// its Node's podCIDRs and addresses and of the Service ranges.
type clusterEvidence struct {
	// families in the order found, the primary first (the Node's first
	// InternalIP, else its first podCIDR).
	families []v1.IPFamily
	// why names each source, e.g. "Node podCIDRs [10.244.1.0/24]".
	why []string
}

func (e *clusterEvidence) add(source string, addrs ...netip.Addr) {
	if len(addrs) == 0 {
		return
	}
	e.why = append(e.why, fmt.Sprintf("%s %v", source, addrs))
	for _, a := range addrs {
		if f := familyOfAddr(a); !slices.Contains(e.families, f) {
			e.families = append(e.families, f)
		}
	}
}

func familyOfAddr(a netip.Addr) v1.IPFamily {
	if a.Unmap().Is4() {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}

// evidenceOf reads the families a cluster serves from this node's Node
// object and the Service ranges (ServiceCIDR objects and --service-cidrs).
// Malformed values are skipped: they say nothing about a family.
func evidenceOf(node *v1.Node, serviceCIDRs []netip.Prefix) clusterEvidence {
	var e clusterEvidence
	if node != nil {
		var internal, external []netip.Addr
		for _, na := range node.Status.Addresses {
			a, err := netip.ParseAddr(na.Address)
			if err != nil {
				continue
			}
			switch na.Type {
			case v1.NodeInternalIP:
				internal = append(internal, a)
			case v1.NodeExternalIP:
				external = append(external, a)
			}
		}
		e.add("Node InternalIPs", internal...)
		var pods []netip.Addr
		for _, s := range node.Spec.PodCIDRs {
			if p, err := netip.ParsePrefix(s); err == nil {
				pods = append(pods, p.Addr())
			}
		}
		e.add("Node podCIDRs", pods...)
		e.add("Node ExternalIPs", external...)
	}
	var ranges []netip.Addr
	for _, p := range serviceCIDRs {
		ranges = append(ranges, p.Addr())
	}
	e.add("Service ranges", ranges...)
	return e
}

// chooseFamilies decides which families this node proxies. An explicit
// --ip-families list is taken as it is, and a family the node cannot proxy is
// an error. "auto" takes the families the cluster serves (evidence); without
// any evidence (no Node object yet, no ranges), the families of the host's
// global addresses. A family the cluster serves that this node's kernel cannot
// proxy is left out with a warning, so the other family still works; none
// left is an error. why says, for the start-up line, where the answer came
// from.
func chooseFamilies(requested string, evidence clusterEvidence, host []netip.Addr, unsupported func(v1.IPFamily) error) (families []v1.IPFamily, why string, err error) {
	requested = strings.TrimSpace(requested)
	if requested != "auto" && requested != "" {
		for _, s := range strings.Split(requested, ",") {
			f := v1.IPFamily(strings.TrimSpace(s))
			if f != v1.IPv4Protocol && f != v1.IPv6Protocol {
				return nil, "", fmt.Errorf("--ip-families: %q is not IPv4 or IPv6", s)
			}
			if err := unsupported(f); err != nil {
				return nil, "", fmt.Errorf("--ip-families %s: this node cannot proxy %s: %w", requested, f, err)
			}
			if !slices.Contains(families, f) {
				families = append(families, f)
			}
		}
		return families, "--ip-families " + requested, nil
	}
	candidates, why := evidence.families, "the cluster serves them: "+strings.Join(evidence.why, ", ")
	if len(candidates) == 0 {
		candidates, why = familiesOf(host), fmt.Sprintf("no Node or Service range read; the host's global addresses %v", globalAddresses(host))
	}
	var dropped []string
	for _, f := range candidates {
		if err := unsupported(f); err != nil {
			dropped = append(dropped, fmt.Sprintf("%s not proxied: %v", f, err))
			continue
		}
		families = append(families, f)
	}
	if len(dropped) > 0 {
		why += "; " + strings.Join(dropped, "; ")
		if len(families) > 0 {
			klog.Warningf("--ip-families auto: the cluster serves a family this node cannot proxy, so its Services get no traffic here: %s", strings.Join(dropped, "; "))
		}
	}
	if len(families) == 0 {
		return nil, "", fmt.Errorf("--ip-families auto: no family this node can proxy (%s)", why)
	}
	return families, why, nil
}

func globalAddresses(addrs []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		if a.IsGlobalUnicast() && !a.IsLinkLocalUnicast() {
			out = append(out, a)
		}
	}
	return out
}

func familiesOf(addrs []netip.Addr) []v1.IPFamily {
	var v4, v6 bool
	for _, a := range globalAddresses(addrs) {
		if a.Unmap().Is4() {
			v4 = true
		} else {
			v6 = true
		}
	}
	var out []v1.IPFamily
	if v4 || !v6 {
		out = append(out, v1.IPv4Protocol)
	}
	if v6 {
		out = append(out, v1.IPv6Protocol)
	}
	return out
}

// errFamilyDisabled is a family switched off in the kernel.
var errFamilyDisabled = errors.New("disabled in the kernel")

// kernelFamilySupport says why this node's kernel and tools cannot proxy a
// family, or nil when they can: IPv6 switched off (ipv6.disable=1 removes
// net.ipv6, disable_ipv6=1 takes every address away) or no ip6tables. The
// same check as adapters.Open's, made before any kernel object is written, so a
// missing family is one clear line and not a failed start half-way.
func kernelFamilySupport(sysctls sysctl.Interface) func(v1.IPFamily) error {
	return func(f v1.IPFamily) error {
		fam := iptables.IPv4
		if f == v1.IPv6Protocol {
			fam = iptables.IPv6
			v, err := sysctls.Get("net.ipv6.conf.all.disable_ipv6")
			if err != nil {
				return fmt.Errorf("IPv6 %w (no net.ipv6.conf.all.disable_ipv6: %v)", errFamilyDisabled, err)
			}
			if strings.TrimSpace(v) == "1" {
				return fmt.Errorf("IPv6 %w (net.ipv6.conf.all.disable_ipv6=1)", errFamilyDisabled)
			}
		}
		if _, err := iptables.New(fam); err != nil {
			return err
		}
		return nil
	}
}

// hostAddresses lists the host's addresses (for auto without a cluster).
func hostAddresses() ([]netip.Addr, error) {
	n, err := netif.New(owned.DummyInterface)
	if err != nil {
		return nil, err
	}
	return n.HostAddresses()
}

// readClusterEvidence reads this node's Node object (waiting up to timeout for
// the kubelet to register it) and the ServiceCIDR objects. Either may be
// missing: the ServiceCIDR list needs a permission and a Kubernetes version
// that not every cluster has, and a node without its Node object falls back to
// the host's addresses.
func readClusterEvidence(ctx context.Context, client kubeapi.Client, nodeName string, serviceCIDRs []netip.Prefix, timeout time.Duration) clusterEvidence {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var node *v1.Node
	for node == nil {
		n, err := readNode(ctx, client, nodeName)
		if err == nil {
			node = n
			break
		}
		select {
		case <-ctx.Done():
			klog.InfoS("Choosing IP families without the Node object", "node", nodeName, "err", err)
		case <-time.After(time.Second):
			continue
		}
		break
	}
	ranges := slices.Clone(serviceCIDRs)
	if list, err := client.ServiceCIDRs().List(ctx, metav1.ListOptions{}); err == nil {
		for _, sc := range list.Items {
			for _, s := range sc.Spec.CIDRs {
				if p, err := netip.ParsePrefix(s); err == nil {
					ranges = append(ranges, p)
				}
			}
		}
	}
	return evidenceOf(node, ranges)
}

// resolveFamiliesOffline is --ip-families for commands without a cluster
// (inspect from a local state): an explicit list, or the host's addresses.
func resolveFamiliesOffline(requested string) ([]v1.IPFamily, error) {
	var host []netip.Addr
	if r := strings.TrimSpace(requested); r == "auto" || r == "" {
		var err error
		if host, err = hostAddresses(); err != nil {
			return nil, err
		}
	}
	families, _, err := chooseFamilies(requested, clusterEvidence{}, host, func(v1.IPFamily) error { return nil })
	return families, err
}

// familiesToProxy is --ip-families for run: the cluster's evidence read
// through client, the host's addresses when there is none, the kernel's
// support checked; the choice and its reason go to the log at start.
func familiesToProxy(ctx context.Context, requested string, client kubeapi.Client, nodeName string, serviceCIDRs []netip.Prefix, sysctlRoot string) ([]v1.IPFamily, error) {
	var evidence clusterEvidence
	var host []netip.Addr
	if r := strings.TrimSpace(requested); r == "auto" || r == "" {
		evidence = readClusterEvidence(ctx, client, nodeName, serviceCIDRs, 10*time.Second)
		var err error
		if host, err = hostAddresses(); err != nil {
			return nil, err
		}
	}
	families, why, err := chooseFamilies(requested, evidence, host, kernelFamilySupport(sysctl.NewAt(sysctlRoot)))
	if err != nil {
		return nil, err
	}
	klog.InfoS("Proxying IP families", "families", families, "why", why)
	return families, nil
}

// readNode reads one Node with a list by name: the ClusterRole grants list and
// watch on Nodes (what the informer needs), not get.
func readNode(ctx context.Context, client kubeapi.Client, name string) (*v1.Node, error) {
	list, err := client.Nodes().List(ctx, nodeListOptions(name))
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if list.Items[i].Name == name {
			return &list.Items[i], nil
		}
	}
	return nil, apierrors.NewNotFound(v1.Resource("nodes"), name)
}
