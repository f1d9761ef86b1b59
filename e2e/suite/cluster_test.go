//go:build e2e

package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/e2e/controlplane/cluster"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The cluster e2e/scenarios/setup.sh builds (its plan is in
// e2e/scenarios/README.md).
const (
	node1Addr  = "198.51.100.1"
	node2Addr  = "198.51.100.2"
	clientAddr = "198.51.100.79"
	vip        = "203.0.113.140" // the load balancer's

	clientAddr6 = "2001:db8:1::79"
	vip6        = "2001:db8:113::140" // the load balancer's IPv6 VIP
)

// pods are setup.sh's: name → node and IPv4 address.
var pods = map[string]struct{ node, ip string }{
	"web": {"node1", "10.244.1.10"},
	"s3":  {"node1", "10.244.1.11"},
	"c1":  {"node1", "10.244.1.20"},
	"u1":  {"node1", "10.244.1.40"},
	"s2":  {"node2", "10.244.2.10"},
	"c2":  {"node2", "10.244.2.20"},
	"u2":  {"node2", "10.244.2.40"},
}

func podIP(name string) string { return pods[name].ip }

// service is a Service's manifest: metadata as a YAML flow mapping, and the
// lines of its spec.
func service(metadata string, spec ...string) string {
	return "apiVersion: v1\nkind: Service\nmetadata: " + metadata + "\nspec:\n  " + strings.Join(spec, "\n  ") + "\n"
}

// httpPort is the spec line of most Services here: port 80 to the echo
// servers' 8080.
const httpPort = "ports: [{port: 80, targetPort: 8080, protocol: TCP}]"

// ApplyService writes the Service in manifest (YAML) as `e2ectl
// apply-service` does and returns what the API server stored. The scenario
// deletes it, with its EndpointSlices, when it ends, and waits until neither
// node has a virtual server for its cluster IP any more.
func (v *V) ApplyService(manifest string) *v1.Service {
	svc, err := cluster.DecodeService(strings.NewReader(manifest))
	v.Must(err)
	ctx, cancel := v.s.ctx()
	defer cancel()
	got, err := cluster.ApplyService(ctx, guest.client, svc)
	v.Must(err)
	ref := cluster.ServiceRef{Namespace: got.Namespace, Name: got.Name}
	if _, ok := v.s.owned[ref]; ok {
		v.s.owned[ref] = got // applied again: the first apply's clean-up deletes it
		return got
	}
	if v.s.owned == nil {
		v.s.owned = map[cluster.ServiceRef]*v1.Service{}
	}
	v.s.owned[ref] = got
	t := v.s.t
	t.Cleanup(func() {
		if svc := v.s.owned[ref]; svc != nil {
			if err := deleteService(svc); err != nil {
				t.Errorf("clean-up: %v", err)
			}
		}
	})
	return got
}

// DeleteService deletes a Service the scenario applied, before its end, and
// waits until its virtual servers are gone.
func (v *V) DeleteService(svc *v1.Service) {
	v.s.owned[cluster.ServiceRef{Namespace: svc.Namespace, Name: svc.Name}] = nil
	v.Must(deleteService(svc))
}

// DeleteServiceObjects deletes a Service the scenario applied from the API,
// before its end, leaving the wait for its virtual servers to the caller.
func (v *V) DeleteServiceObjects(svc *v1.Service) {
	v.s.owned[cluster.ServiceRef{Namespace: svc.Namespace, Name: svc.Name}] = nil
	v.Must(deleteServiceObjects(svc))
}

// deleteService deletes svc and its EndpointSlices as `e2ectl
// delete-service` does, then waits until neither node has a virtual server
// for its cluster IPs.
func deleteService(svc *v1.Service) error {
	if err := deleteServiceObjects(svc); err != nil {
		return err
	}
	for _, node := range []string{"node1", "node2"} {
		if ok, last := waitNoVirtualServer(node, svc.Spec.ClusterIPs, 30*time.Second); !ok {
			return fmt.Errorf("%s deleted, but %s %s after 30s", cluster.ServiceRef{Namespace: svc.Namespace, Name: svc.Name}, node, last)
		}
	}
	return nil
}

// deleteServiceObjects deletes svc and its EndpointSlices from the API.
func deleteServiceObjects(svc *v1.Service) error {
	ref := cluster.ServiceRef{Namespace: svc.Namespace, Name: svc.Name}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// No garbage collector runs to follow the slices' ownerReferences.
	if err := cluster.SetEndpoints(ctx, guest.client, ref, nil); err != nil {
		return err
	}
	if err := guest.client.CoreV1().Services(ref.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete Service %s: %w", ref, err)
	}
	return nil
}

// waitNoVirtualServer waits up to limit until the node has no virtual
// server at any of addrs (any port and protocol); last says which one stays.
func waitNoVirtualServer(node string, addrs []string, limit time.Duration) (bool, string) {
	return waitUntil(limit, func() (bool, string) {
		vss, err := virtualServers(node)
		if err != nil {
			return false, err.Error()
		}
		for _, vs := range vss {
			if slices.Contains(addrs, vs.Address.String()) {
				return false, "still has " + vs.String()
			}
		}
		return true, ""
	})
}

// SetEndpoints makes the Service's endpoints exactly these, each
// "POD@NODE" or "IP@NODE" (see cluster.ParseEndpoint; a pod's name stands
// for its address).
func (v *V) SetEndpoints(svc *v1.Service, endpoints ...string) {
	var eps []cluster.Endpoint
	for _, e := range endpoints {
		addr, rest, _ := strings.Cut(e, "@")
		if p, ok := pods[addr]; ok {
			addr = p.ip
		}
		ep, err := cluster.ParseEndpoint(addr + "@" + rest)
		v.Must(err)
		eps = append(eps, ep)
	}
	ctx, cancel := v.s.ctx()
	defer cancel()
	v.Must(cluster.SetEndpoints(ctx, guest.client, cluster.ServiceRef{Namespace: svc.Namespace, Name: svc.Name}, eps))
}

// SetExternalTrafficPolicy patches the Service as `e2ectl patch-etp` does.
func (v *V) SetExternalTrafficPolicy(svc *v1.Service, policy v1.ServiceExternalTrafficPolicy) *v1.Service {
	ctx, cancel := v.s.ctx()
	defer cancel()
	got, err := cluster.SetExternalTrafficPolicy(ctx, guest.client, cluster.ServiceRef{Namespace: svc.Namespace, Name: svc.Name}, policy)
	v.Must(err)
	return got
}

// SetLoadBalancerIngress writes status.loadBalancer.ingress as a cloud
// controller would (no controller runs in this cluster).
func (v *V) SetLoadBalancerIngress(svc *v1.Service, ip string) {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"loadBalancer": map[string]any{"ingress": []map[string]string{{"ip": ip}}}}})
	v.Must(err)
	ctx, cancel := v.s.ctx()
	defer cancel()
	_, err = guest.client.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		v.Fatalf("set status.loadBalancer.ingress of %s: %v", svc.Name, err)
	}
}

// serviceInfo is `e2ectl apply-service`'s answer (cluster.ServiceInfo),
// only the given keys, as the tutorial shows them.
func serviceInfo(svc *v1.Service, keys ...string) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(cluster.ServiceInfo(svc)), "\n") {
		k, _, _ := strings.Cut(l, "=")
		if slices.Contains(keys, k) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// inNamespace opens a handle on the named network namespace for fn.
func inNamespace(name string, fn func(netns.NsHandle) error) error {
	h, err := netns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", name, err)
	}
	defer h.Close()
	return fn(h)
}

// withIPVS and withIPSet run fn on the project's ipvs or ipset package
// opened in the node's namespace.
func withIPVS(node string, fn func(ipvs.Interface) error) error {
	return inNamespace(node, func(h netns.NsHandle) error {
		k, err := ipvs.NewInNamespace(h)
		if err != nil {
			return err
		}
		defer k.Close()
		return fn(k)
	})
}

func withIPSet(node string, fn func(*ipset.Kernel) error) error {
	return inNamespace(node, func(h netns.NsHandle) error {
		k, err := ipset.NewInNamespace(h)
		if err != nil {
			return err
		}
		defer k.Close()
		return fn(k)
	})
}

// conntrackFlows are the node's conntrack flows of one family (4 or 6),
// read with the project's conntrack package.
func conntrackFlows(node string, family int) ([]conntrack.Flow, error) {
	var flows []conntrack.Flow
	err := inNamespace(node, func(h netns.NsHandle) error {
		t, err := conntrack.NewInNamespace(int(h))
		if err != nil {
			return err
		}
		defer t.Close()
		flows, err = t.Flows(family)
		return err
	})
	return flows, err
}

// virtualServers reads the node's IPVS table with the project's ipvs package.
func virtualServers(node string) ([]ipvs.VirtualServer, error) {
	var vss []ipvs.VirtualServer
	err := withIPVS(node, func(k ipvs.Interface) error {
		var err error
		vss, err = k.VirtualServers()
		return err
	})
	return vss, err
}

// realServers reads one virtual server's real servers in a namespace.
func realServers(where string, proto ipvs.Protocol, addr string, port uint16) ([]ipvs.RealServer, error) {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return nil, err
	}
	var rss []ipvs.RealServer
	err = withIPVS(where, func(k ipvs.Interface) error {
		rss, err = k.RealServers(ipvs.VirtualServerKey{Protocol: proto, Address: a, Port: port})
		return err
	})
	return rss, err
}

// WaitRealServers waits until the virtual server exists on the node with
// exactly these real servers ("IP:PORT", any order).
func (v *V) WaitRealServers(node string, proto ipvs.Protocol, addr string, port uint16, want ...string) {
	slices.Sort(want)
	v.WaitUntil(30*time.Second, fmt.Sprintf("%s's %s %s:%d has not exactly %v", node, proto, addr, port, want), hasRealServers(node, proto, addr, port, want))
}

// hasRealServers is the condition that the node's virtual server exists
// with exactly the real servers want (sorted), read with the ipvs package.
func hasRealServers(node string, proto ipvs.Protocol, addr string, port uint16, want []string) func() (bool, string) {
	return func() (bool, string) {
		rss, err := realServers(node, proto, addr, port)
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, rs := range rss {
			got = append(got, rs.String())
		}
		slices.Sort(got)
		return slices.Equal(got, want), fmt.Sprintf("real servers %v", got)
	}
}

// inSet tells whether the node's ipset has the entry, read with the
// project's ipset package.
func inSet(node, set string, want ipset.Entry) (bool, error) {
	var found bool
	err := withIPSet(node, func(k *ipset.Kernel) error {
		entries, err := k.Entries(set)
		if err != nil {
			return err
		}
		found = slices.Contains(entries, want)
		return nil
	})
	return found, err
}

// WaitInSet waits until the node's set holds ADDR,PROTO:PORT.
func (v *V) WaitInSet(node, set, addr, proto string, port uint16) {
	e := ipset.Entry{IP: netip.MustParseAddr(addr), Protocol: proto, Port: port}
	v.WaitUntil(30*time.Second, fmt.Sprintf("%s's %s lacks %s", node, set, e.String(ipset.HashIPPort)), func() (bool, string) {
		ok, err := inSet(node, set, e)
		if err != nil {
			return false, err.Error()
		}
		return ok, "not in the set"
	})
}

// events are the Events about the Service in namespace default, each
// "TYPE REASON: MESSAGE".
func events(name string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := guest.client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Type+" "+e.Reason+": "+e.Message)
	}
	return out, nil
}

// WaitEvent waits up to 30 s for an Event about the Service with this
// reason and every text in its message, shows the Events, and fails the
// step without one.
func (v *V) WaitEvent(name, reason string, texts ...string) {
	var got []string
	ok, last := waitUntil(30*time.Second, func() (bool, string) {
		var err error
		if got, err = events(name); err != nil {
			return false, err.Error()
		}
		for _, e := range got {
			_, msg, _ := strings.Cut(e, reason+": ")
			if strings.Contains(e, " "+reason+": ") && containsAll(msg, texts) {
				return true, ""
			}
		}
		return false, ""
	})
	v.Show("-", "kubectl get events --field-selector involvedObject.name="+name, strings.Join(got, "\n"))
	if !ok {
		v.Errorf("no %s Event on %s naming %q %s", reason, name, texts, last)
	}
}

func containsAll(s string, texts []string) bool {
	for _, t := range texts {
		if !strings.Contains(s, t) {
			return false
		}
	}
	return true
}
