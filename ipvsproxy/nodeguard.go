package ipvsproxy

import (
	"net/netip"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// KubernetesService is the Service whose endpoints are the API servers: the
// address guard (addressguard.go) keeps every Service off their addresses.
var KubernetesService = types.NamespacedName{Namespace: "default", Name: "kubernetes"}

// APIServerAddresses are the endpoint addresses of default/kubernetes.
func APIServerAddresses(slices_ []*EndpointSlice) []netip.Addr {
	var out []netip.Addr
	add := func(a netip.Addr) {
		if !slices.Contains(out, a.Unmap()) {
			out = append(out, a.Unmap())
		}
	}
	for _, s := range slices_ {
		for i := range s.Endpoints {
			if a, text, ok := s.Address(i); ok {
				add(a)
			} else if a, err := netip.ParseAddr(text); err == nil {
				add(a) // one with a zone
			}
		}
		for _, text := range s.MoreAddresses() {
			if a, err := netip.ParseAddr(text); err == nil {
				add(a)
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// ClusterNodes tracks the addresses of every Node of the cluster, for the
// address guard: from an informer on all Nodes (Set, Delete), or from the
// EndpointSlices that publish them (SetPublished; internal/daemon/nodeaddresses),
// which change only when an address does. Only names and addresses are kept.
type ClusterNodes struct {
	mu     sync.Mutex
	byName map[string][]netip.Addr
	// published are the addresses each published slice lists, by slice
	// name and Node: a Node's addresses are in one slice per family.
	published map[string]map[string][]netip.Addr
	notify    func()
	// othersOf caches others' answer until a Node changes: every sync, the
	// partial ones too, asks for it, and it costs O(Nodes) to build.
	othersOf   string
	othersMemo map[netip.Addr]string
}

func NewClusterNodes(notify func()) *ClusterNodes {
	return &ClusterNodes{byName: map[string][]netip.Addr{}, notify: notify}
}

// Set records node's addresses (nil node name: ignored).
func (c *ClusterNodes) Set(node *v1.Node) {
	if node == nil {
		return
	}
	var addrs []netip.Addr
	for _, na := range node.Status.Addresses {
		if na.Type != v1.NodeInternalIP && na.Type != v1.NodeExternalIP {
			continue
		}
		if a, err := netip.ParseAddr(na.Address); err == nil && !slices.Contains(addrs, a.Unmap()) {
			addrs = append(addrs, a.Unmap())
		}
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	c.mu.Lock()
	same := slices.Equal(c.byName[node.Name], addrs)
	c.byName[node.Name] = addrs
	if !same {
		c.othersMemo = nil
	}
	c.mu.Unlock()
	if !same {
		c.notify()
	}
}

// Delete forgets a Node.
func (c *ClusterNodes) Delete(name string) {
	c.mu.Lock()
	_, had := c.byName[name]
	delete(c.byName, name)
	if had {
		c.othersMemo = nil
	}
	c.mu.Unlock()
	if had {
		c.notify()
	}
}

// SetPublished records the Node addresses one published slice lists (every
// endpoint's addresses under its Node's name), in place of what it listed
// before.
func (c *ClusterNodes) SetPublished(slice *EndpointSlice) {
	listed := map[string][]netip.Addr{}
	for i := range slice.Endpoints {
		node := slice.Endpoints[i].NodeName()
		if node == "" {
			continue
		}
		addrs := listed[node]
		if a, _, ok := slice.Address(i); ok {
			addrs = append(addrs, a)
		}
		for _, text := range slice.MoreAddressesOf(i) {
			if a, err := netip.ParseAddr(text); err == nil {
				addrs = append(addrs, a.Unmap())
			}
		}
		listed[node] = addrs
	}
	c.publish(slice.Name, listed)
}

// DeletePublished forgets what the published slice name listed.
func (c *ClusterNodes) DeletePublished(name string) { c.publish(name, nil) }

// publish makes listed what slice lists, and each Node it names, or named,
// hold the addresses every published slice lists for it.
func (c *ClusterNodes) publish(slice string, listed map[string][]netip.Addr) {
	c.mu.Lock()
	if c.published == nil {
		c.published = map[string]map[string][]netip.Addr{}
	}
	before := c.published[slice]
	if listed == nil {
		delete(c.published, slice)
	} else {
		c.published[slice] = listed
	}
	changed := false
	for _, nodes := range []map[string][]netip.Addr{before, listed} {
		for node := range nodes {
			var addrs []netip.Addr
			for _, other := range c.published {
				for _, a := range other[node] {
					if !slices.Contains(addrs, a) {
						addrs = append(addrs, a)
					}
				}
			}
			slices.SortFunc(addrs, netip.Addr.Compare)
			had, known := c.byName[node]
			switch {
			case len(addrs) == 0 && known:
				delete(c.byName, node)
				changed = true
			case len(addrs) > 0 && (!known || !slices.Equal(had, addrs)):
				c.byName[node] = addrs
				changed = true
			}
		}
	}
	if changed {
		c.othersMemo = nil
	}
	c.mu.Unlock()
	if changed {
		c.notify()
	}
}

// PublishedHandler is where an informer on EndpointSlices sends its events
// for the Node addresses published in namespace under the service name
// service; every other slice is left to the tracker.
func (c *ClusterNodes) PublishedHandler(namespace, service string) cache.ResourceEventHandler {
	ours := func(obj any) (*EndpointSlice, bool) {
		s, ok := untombstone(obj).(*EndpointSlice)
		return s, ok && s.Namespace == namespace && s.ServiceName == service
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if s, ok := ours(obj); ok {
				c.SetPublished(s)
			}
		},
		UpdateFunc: func(old, obj any) {
			s, ok := ours(obj)
			if was, wasOurs := ours(old); wasOurs && !ok {
				c.DeletePublished(was.Name) // relabelled away
			}
			if ok {
				c.SetPublished(s)
			}
		},
		DeleteFunc: func(obj any) {
			if s, ok := ours(obj); ok {
				c.DeletePublished(s.Name)
			}
		},
	}
}

// Others maps every address of a Node other than self to that Node. The map
// is shared: callers only read it.
func (c *ClusterNodes) Others(self string) map[netip.Addr]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.othersMemo != nil && c.othersOf == self {
		return c.othersMemo
	}
	out := map[netip.Addr]string{}
	defer func() { c.othersOf, c.othersMemo = self, out }()
	for name, addrs := range c.byName {
		if name == self {
			continue
		}
		for _, a := range addrs {
			out[a] = name
		}
	}
	return out
}

// Handler is where an informer on all Nodes sends its events.
func (c *ClusterNodes) Handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.Set(asNode(obj)) },
		UpdateFunc: func(_, obj any) { c.Set(asNode(obj)) },
		DeleteFunc: func(obj any) {
			if n, ok := untombstone(obj).(*v1.Node); ok {
				c.Delete(n.Name)
			}
		},
	}
}

func asNode(obj any) *v1.Node {
	n, _ := obj.(*v1.Node)
	return n
}

// Names lists the Nodes known.
func (c *ClusterNodes) Names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.byName))
	for name := range c.byName {
		out = append(out, name)
	}
	return out
}
