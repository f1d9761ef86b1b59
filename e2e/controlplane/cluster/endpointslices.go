package cluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// ManagedBy is the endpointslice.kubernetes.io/managed-by value of the slices
// written here. It is not the EndpointSlice controller's own value, so no
// controller started later would take them over or delete them.
const ManagedBy = "e2ectl.ipvsproxy.io"

// EndpointState is the lifecycle point of the pod behind an endpoint, as the
// EndpointSlice controller would report it in the endpoint's conditions.
type EndpointState string

const (
	// Ready: a running pod that passes its readiness probe.
	Ready EndpointState = "ready"
	// NotReady: a running pod failing its readiness probe; never used.
	NotReady EndpointState = "notready"
	// Terminating: a deleted pod still passing readiness; used only when no
	// endpoint of the Service is ready.
	Terminating EndpointState = "terminating"
	// TerminatingNotServing: a deleted pod that stopped serving.
	TerminatingNotServing EndpointState = "terminating-notserving"
)

func (s EndpointState) conditions() (discovery.EndpointConditions, error) {
	ready, serving, terminating := false, false, false
	switch s {
	case Ready:
		ready, serving = true, true
	case NotReady:
	case Terminating:
		serving, terminating = true, true
	case TerminatingNotServing:
		terminating = true
	default:
		return discovery.EndpointConditions{}, fmt.Errorf("unknown endpoint state %q (want %s, %s, %s or %s)",
			s, Ready, NotReady, Terminating, TerminatingNotServing)
	}
	return discovery.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating}, nil
}

// Endpoint is one pod address behind a Service.
type Endpoint struct {
	IP    net.IP
	Node  string // empty: the endpoint has no nodeName
	State EndpointState
	// ZoneHints and NodeHints are hints.forZones and hints.forNodes, as the
	// EndpointSlice controller writes them for a Service's
	// trafficDistribution; none given: the endpoint has no hints.
	ZoneHints, NodeHints []string
}

// ParseEndpoint reads IP[@NODE[:STATE]][+zones=Z[,Z]...][+nodes=N[,N]...],
// e.g. 10.244.1.5@node1, 10.244.1.5@node1:terminating or
// 10.244.1.5@node1+zones=zone-a+nodes=node1; the state defaults to ready.
func ParseEndpoint(s string) (Endpoint, error) {
	base, hintText, hinted := strings.Cut(s, "+")
	ipText, rest, _ := strings.Cut(base, "@")
	node, state, _ := strings.Cut(rest, ":")
	ep := Endpoint{IP: net.ParseIP(ipText), Node: node, State: EndpointState(state)}
	if ep.IP == nil {
		return Endpoint{}, fmt.Errorf("parse endpoint %q: %q is not an IP address", s, ipText)
	}
	if hinted {
		for _, h := range strings.Split(hintText, "+") {
			kind, names, _ := strings.Cut(h, "=")
			list := strings.Split(names, ",")
			if slices.Contains(list, "") {
				return Endpoint{}, fmt.Errorf("parse endpoint %q: hint %q names nothing", s, h)
			}
			switch {
			case kind == "zones" && ep.ZoneHints == nil:
				ep.ZoneHints = list
			case kind == "nodes" && ep.NodeHints == nil:
				ep.NodeHints = list
			default:
				return Endpoint{}, fmt.Errorf("parse endpoint %q: hint %q: want zones=... or nodes=..., each at most once", s, h)
			}
		}
	}
	if ep.State == "" {
		ep.State = Ready
	}
	if _, err := ep.State.conditions(); err != nil {
		return Endpoint{}, fmt.Errorf("parse endpoint %q: %w", s, err)
	}
	return ep, nil
}

func (e Endpoint) addressType() discovery.AddressType {
	if e.IP.To4() != nil {
		return discovery.AddressTypeIPv4
	}
	return discovery.AddressTypeIPv6
}

// SliceName is the name of svc's slice for one address family.
func SliceName(svc string, family discovery.AddressType) string {
	return fmt.Sprintf("%s-e2e-%s", svc, strings.ToLower(string(family)))
}

// BuildSlices turns the endpoints of svc into one EndpointSlice per address
// family, as the EndpointSlice controller would: ports from the Service's
// target ports, zone from the endpoint's node (zones maps node name to zone),
// and the labels the proxier selects on. It makes no API call.
func BuildSlices(svc *v1.Service, endpoints []Endpoint, zones map[string]string, now time.Time) ([]*discovery.EndpointSlice, error) {
	ports := make([]discovery.EndpointPort, 0, len(svc.Spec.Ports))
	for _, sp := range svc.Spec.Ports {
		target := sp.TargetPort.IntValue()
		if sp.TargetPort.Type == intstr.Int && target == 0 {
			target = int(sp.Port) // an unset targetPort means the Service port
		}
		if target <= 0 {
			// A named targetPort is resolved against a pod's container ports;
			// there are no pods here.
			return nil, fmt.Errorf("build endpoint slices of %s/%s: port %q has named targetPort %q, want a number",
				svc.Namespace, svc.Name, sp.Name, sp.TargetPort.String())
		}
		name, proto, port := sp.Name, sp.Protocol, int32(target)
		ports = append(ports, discovery.EndpointPort{Name: &name, Protocol: &proto, Port: &port})
	}

	byFamily := map[discovery.AddressType]*discovery.EndpointSlice{}
	seen := map[string]bool{}
	for _, ep := range endpoints {
		if seen[ep.IP.String()] {
			return nil, fmt.Errorf("build endpoint slices of %s/%s: endpoint %s given twice", svc.Namespace, svc.Name, ep.IP)
		}
		seen[ep.IP.String()] = true
		family := ep.addressType()
		slice := byFamily[family]
		if slice == nil {
			slice = &discovery.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{
					Name:      SliceName(svc.Name, family),
					Namespace: svc.Namespace,
					Labels: map[string]string{
						discovery.LabelServiceName: svc.Name,
						discovery.LabelManagedBy:   ManagedBy,
					},
					// What kube-proxy's network programming latency metric reads.
					Annotations: map[string]string{
						v1.EndpointsLastChangeTriggerTime: now.UTC().Format(time.RFC3339Nano),
					},
				},
				AddressType: family,
				Ports:       ports,
			}
			if svc.UID != "" {
				slice.OwnerReferences = []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
				}}
			}
			byFamily[family] = slice
		}
		conditions, err := ep.State.conditions()
		if err != nil {
			return nil, fmt.Errorf("build endpoint slices of %s/%s: endpoint %s: %w", svc.Namespace, svc.Name, ep.IP, err)
		}
		e := discovery.Endpoint{Addresses: []string{ep.IP.String()}, Conditions: conditions}
		if len(ep.ZoneHints) > 0 || len(ep.NodeHints) > 0 {
			e.Hints = &discovery.EndpointHints{}
			for _, z := range ep.ZoneHints {
				e.Hints.ForZones = append(e.Hints.ForZones, discovery.ForZone{Name: z})
			}
			for _, n := range ep.NodeHints {
				e.Hints.ForNodes = append(e.Hints.ForNodes, discovery.ForNode{Name: n})
			}
		}
		if ep.Node != "" {
			node := ep.Node
			e.NodeName = &node
			if z, ok := zones[node]; ok && z != "" {
				e.Zone = &z
			}
		}
		slice.Endpoints = append(slice.Endpoints, e)
	}

	slices := make([]*discovery.EndpointSlice, 0, len(byFamily))
	for _, s := range byFamily {
		slices = append(slices, s)
	}
	sort.Slice(slices, func(i, j int) bool { return slices[i].Name < slices[j].Name })
	return slices, nil
}

// SetEndpoints makes the endpoints of the Service exactly the given ones:
// its slices are created or replaced, and a slice of a family that no longer
// has endpoints is deleted. An empty list leaves the Service with none.
func SetEndpoints(ctx context.Context, cs kubernetes.Interface, ref ServiceRef, endpoints []Endpoint) error {
	svc, err := cs.CoreV1().Services(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("set endpoints of %s: %w", ref, err)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("set endpoints of %s: list nodes for zones: %w", ref, err)
	}
	zones := map[string]string{}
	for _, n := range nodes.Items {
		zones[n.Name] = n.Labels[ZoneLabel]
	}
	want, err := BuildSlices(svc, endpoints, zones, time.Now())
	if err != nil {
		return err
	}

	client := cs.DiscoveryV1().EndpointSlices(ref.Namespace)
	existing, err := client.List(ctx, metav1.ListOptions{LabelSelector: ownSelector(ref.Name)})
	if err != nil {
		return fmt.Errorf("set endpoints of %s: list its slices: %w", ref, err)
	}
	kept := map[string]bool{}
	for _, s := range want {
		kept[s.Name] = true
		if _, err := client.Create(ctx, s, metav1.CreateOptions{FieldManager: FieldManager}); apierrors.IsAlreadyExists(err) {
			var cur *discovery.EndpointSlice
			if cur, err = client.Get(ctx, s.Name, metav1.GetOptions{}); err == nil {
				s.ResourceVersion = cur.ResourceVersion
				_, err = client.Update(ctx, s, metav1.UpdateOptions{FieldManager: FieldManager})
			}
			if err != nil {
				return fmt.Errorf("set endpoints of %s: update slice %s: %w", ref, s.Name, err)
			}
		} else if err != nil {
			return fmt.Errorf("set endpoints of %s: create slice %s: %w", ref, s.Name, err)
		}
	}
	for _, s := range existing.Items {
		if kept[s.Name] {
			continue
		}
		if err := client.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("set endpoints of %s: delete slice %s: %w", ref, s.Name, err)
		}
	}
	return nil
}

// CurrentEndpoints reads back the endpoints of the Service's own slices.
func CurrentEndpoints(ctx context.Context, cs kubernetes.Interface, ref ServiceRef) ([]Endpoint, error) {
	list, err := cs.DiscoveryV1().EndpointSlices(ref.Namespace).List(ctx, metav1.ListOptions{LabelSelector: ownSelector(ref.Name)})
	if err != nil {
		return nil, fmt.Errorf("list endpoint slices of %s: %w", ref, err)
	}
	var eps []Endpoint
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			ep := Endpoint{IP: net.ParseIP(e.Addresses[0]), State: stateOf(e.Conditions)}
			if e.NodeName != nil {
				ep.Node = *e.NodeName
			}
			if e.Hints != nil {
				for _, z := range e.Hints.ForZones {
					ep.ZoneHints = append(ep.ZoneHints, z.Name)
				}
				for _, n := range e.Hints.ForNodes {
					ep.NodeHints = append(ep.NodeHints, n.Name)
				}
			}
			eps = append(eps, ep)
		}
	}
	return eps, nil
}

// RemoveEndpoint deletes one address from the Service's endpoints, as when
// its pod is gone; removing an address that is not there is an error, so a
// scenario that mistypes an address fails loudly.
func RemoveEndpoint(ctx context.Context, cs kubernetes.Interface, ref ServiceRef, ip net.IP) error {
	eps, err := CurrentEndpoints(ctx, cs, ref)
	if err != nil {
		return err
	}
	kept := eps[:0]
	for _, ep := range eps {
		if !ep.IP.Equal(ip) {
			kept = append(kept, ep)
		}
	}
	if len(kept) == len(eps) {
		return fmt.Errorf("remove endpoint %s from %s: no such endpoint", ip, ref)
	}
	return SetEndpoints(ctx, cs, ref, kept)
}

func ownSelector(svc string) string {
	return discovery.LabelServiceName + "=" + svc + "," + discovery.LabelManagedBy + "=" + ManagedBy
}

func stateOf(c discovery.EndpointConditions) EndpointState {
	is := func(b *bool) bool { return b != nil && *b }
	switch {
	case is(c.Ready):
		return Ready
	case is(c.Terminating) && is(c.Serving):
		return Terminating
	case is(c.Terminating):
		return TerminatingNotServing
	default:
		return NotReady
	}
}
