package nodeaddresses

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// memorySlices is the API server's EndpointSlices of every namespace, as far
// as the publisher needs them: resource versions, label selectors, conflicts.
type memorySlices struct {
	objects map[string]*discovery.EndpointSlice // namespace/name
	version int
	writes  []string
}

func newMemorySlices() *memorySlices {
	return &memorySlices{objects: map[string]*discovery.EndpointSlice{}}
}

func (m *memorySlices) List(_ context.Context, namespace string, opts metav1.ListOptions) (*discovery.EndpointSliceList, error) {
	sel, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return nil, err
	}
	out := &discovery.EndpointSliceList{}
	for _, s := range m.objects {
		if s.Namespace == namespace && sel.Matches(labels.Set(s.Labels)) {
			out.Items = append(out.Items, *s.DeepCopy())
		}
	}
	return out, nil
}

func (m *memorySlices) put(s *discovery.EndpointSlice) *discovery.EndpointSlice {
	m.version++
	c := s.DeepCopy()
	c.ResourceVersion = strconv.Itoa(m.version)
	m.objects[s.Namespace+"/"+s.Name] = c
	return c.DeepCopy()
}

func (m *memorySlices) Create(_ context.Context, s *discovery.EndpointSlice) (*discovery.EndpointSlice, error) {
	if m.objects[s.Namespace+"/"+s.Name] != nil {
		return nil, apierrors.NewAlreadyExists(discovery.Resource("endpointslices"), s.Name)
	}
	m.writes = append(m.writes, "create "+s.Name)
	return m.put(s), nil
}

func (m *memorySlices) Update(_ context.Context, s *discovery.EndpointSlice) (*discovery.EndpointSlice, error) {
	have := m.objects[s.Namespace+"/"+s.Name]
	if have == nil {
		return nil, apierrors.NewNotFound(discovery.Resource("endpointslices"), s.Name)
	}
	if have.ResourceVersion != s.ResourceVersion {
		return nil, apierrors.NewConflict(discovery.Resource("endpointslices"), s.Name, fmt.Errorf("resource version %s, not %s", have.ResourceVersion, s.ResourceVersion))
	}
	m.writes = append(m.writes, "update "+s.Name)
	return m.put(s), nil
}

func (m *memorySlices) Delete(_ context.Context, namespace, name string) error {
	if m.objects[namespace+"/"+name] == nil {
		return apierrors.NewNotFound(discovery.Resource("endpointslices"), name)
	}
	m.writes = append(m.writes, "delete "+name)
	delete(m.objects, namespace+"/"+name)
	return nil
}

func node(name string, addrs ...string) *v1.Node {
	n := &v1.Node{}
	n.Name = name
	for _, a := range addrs {
		typ := v1.NodeInternalIP
		if a[0] == '+' {
			typ, a = v1.NodeExternalIP, a[1:]
		}
		n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: typ, Address: a})
	}
	n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: name})
	return n
}

// published reads the Nodes' addresses back from what is in namespace, as a
// daemon reads them.
func published(m *memorySlices, namespace string) map[string][]netip.Addr {
	out := map[string][]netip.Addr{}
	list, _ := m.List(context.Background(), namespace, metav1.ListOptions{LabelSelector: ownSelector()})
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			out[*e.NodeName] = append(out[*e.NodeName], netip.MustParseAddr(e.Addresses[0]))
		}
	}
	for _, addrs := range out {
		slices.SortFunc(addrs, netip.Addr.Compare)
	}
	return out
}

// Every InternalIP and ExternalIP of every Node is published once, IPv4
// and IPv6 apart, under its Node's name; host names are not addresses.
func TestSlicesPublishEveryAddressOfEveryNode(t *testing.T) {
	nodes := map[string][]netip.Addr{}
	for _, n := range []*v1.Node{node("a", "198.51.100.1", "2001:db8::1"), node("b", "198.51.100.2", "+203.0.113.2"), node("c", "2001:db8::3")} {
		nodes[n.Name] = Addresses(n)
	}
	got := map[string][]netip.Addr{}
	for name, s := range Slices("kube-system", nodes) {
		if s.Namespace != "kube-system" || s.Labels[discovery.LabelServiceName] != ServiceName || s.Labels[discovery.LabelManagedBy] != managedBy {
			t.Errorf("slice %s: namespace %q labels %v", name, s.Namespace, s.Labels)
		}
		for _, e := range s.Endpoints {
			a := netip.MustParseAddr(e.Addresses[0])
			if a.Is4() != (s.AddressType == discovery.AddressTypeIPv4) {
				t.Errorf("slice %s of %s holds %s", name, s.AddressType, a)
			}
			if name != sliceName(s.AddressType, shardOf(*e.NodeName)) {
				t.Errorf("%s's address %s in slice %s", *e.NodeName, a, name)
			}
			got[*e.NodeName] = append(got[*e.NodeName], a)
		}
	}
	for _, addrs := range got {
		slices.SortFunc(addrs, netip.Addr.Compare)
	}
	want := map[string][]netip.Addr{
		"a": {netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("2001:db8::1")},
		"b": {netip.MustParseAddr("198.51.100.2"), netip.MustParseAddr("203.0.113.2")},
		"c": {netip.MustParseAddr("2001:db8::3")},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("published %v, want %v", got, want)
	}
}

// A kubelet's status report (the same addresses) writes nothing; an address
// that changes rewrites the one slice holding it; a Node gone takes its
// slice with it when it was the last there; slices someone edited or
// deleted are written back; no other slice of the namespace is touched.
func TestPublisherWritesOnlyWhatChanged(t *testing.T) {
	ctx := context.Background()
	m := newMemorySlices()
	foreign := &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns-abcde", Namespace: "kube-system",
		Labels: map[string]string{discovery.LabelServiceName: "kube-dns"}}, AddressType: discovery.AddressTypeIPv4}
	m.Create(ctx, foreign)
	p := New("kube-system", m)
	for i := range 40 {
		p.SetNode(node(fmt.Sprintf("node-%02d", i), fmt.Sprintf("198.51.100.%d", i+1)))
	}
	if _, err := p.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	if got := published(m, "kube-system"); len(got) != 40 || got["node-07"][0] != netip.MustParseAddr("198.51.100.8") {
		t.Fatalf("published %v", got)
	}
	// Status reports: nothing to write, not even a pass.
	<-p.changed
	for i := range 40 {
		n := node(fmt.Sprintf("node-%02d", i), fmt.Sprintf("198.51.100.%d", i+1))
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
		p.SetNode(n)
	}
	select {
	case <-p.changed:
		t.Error("a status report asked for a publish")
	default:
	}
	if writes, err := p.Publish(ctx); err != nil || writes != 0 {
		t.Fatalf("an unchanged cluster: %d writes, %v", writes, err)
	}
	m.writes = nil
	p.SetNode(node("node-07", "198.51.100.107"))
	if writes, err := p.Publish(ctx); err != nil || writes != 1 || len(m.writes) != 1 || m.writes[0] != "update "+sliceName(discovery.AddressTypeIPv4, shardOf("node-07")) {
		t.Fatalf("one address changed: %d writes %v, %v", writes, m.writes, err)
	}
	// Someone deletes a published slice and edits another.
	victim := sliceName(discovery.AddressTypeIPv4, shardOf("node-03"))
	m.Delete(ctx, "kube-system", victim)
	edited := m.objects["kube-system/"+sliceName(discovery.AddressTypeIPv4, shardOf("node-09"))]
	edited.Endpoints[0].Addresses = []string{"192.0.2.66"}
	if _, err := p.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	got := published(m, "kube-system")
	if got["node-03"][0] != netip.MustParseAddr("198.51.100.4") || got["node-07"][0] != netip.MustParseAddr("198.51.100.107") || len(got) != 40 {
		t.Fatalf("after repair: %v", got)
	}
	for name, addrs := range got {
		for _, a := range addrs {
			if a == netip.MustParseAddr("192.0.2.66") {
				t.Errorf("%s still shows the edited address", name)
			}
		}
	}
	// Every Node of a shard goes: its slice goes.
	shard := shardOf("node-11")
	for i := range 40 {
		if name := fmt.Sprintf("node-%02d", i); shardOf(name) == shard {
			p.DeleteNode(name)
		}
	}
	if _, err := p.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	if m.objects["kube-system/"+sliceName(discovery.AddressTypeIPv4, shard)] != nil {
		t.Errorf("the slice of an empty shard was left")
	}
	if m.objects["kube-system/kube-dns-abcde"] == nil || len(m.objects["kube-system/kube-dns-abcde"].Endpoints) != 0 {
		t.Errorf("another slice of the namespace was touched")
	}
}
