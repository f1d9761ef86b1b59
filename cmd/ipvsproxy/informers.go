package main

import (
	"context"
	"fmt"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/kubeapi"
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/nodeaddresses"
	"github.com/ipvsproxy/ipvsproxy/internal/sharedslices"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// What the daemon watches, written once: `inspect --kubeconfig` lists with
// the same options, so it cannot name objects the daemon does not see.
// Neither a Service nor an EndpointSlice of another proxy (the label
// service.kubernetes.io/service-proxy-name), nor a headless Service's
// slices; this node's Node alone by name.

func serviceListOptions() metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: withoutLabels(labelServiceProxyName)}
}

func endpointSliceListOptions() metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: withoutLabels(labelServiceProxyName, labelHeadless)}
}

func nodeListOptions(nodeName string) metav1.ListOptions {
	return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", nodeName).String()}
}

// informerSelections are the informers' tweaks of the list and watch
// options: the selectors above, for Services, EndpointSlices and this Node.
func informerSelections(nodeName string) (services, slices, node func(*metav1.ListOptions)) {
	return selecting(serviceListOptions()), selecting(endpointSliceListOptions()), selecting(nodeListOptions(nodeName))
}

// selecting sets want's selectors on the options the reflector passes and
// changes nothing else: those carry the resource version a watch resumes
// from, the bookmarks, the watch-list's initial events and the paging.
func selecting(want metav1.ListOptions) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) {
		o.LabelSelector, o.FieldSelector = want.LabelSelector, want.FieldSelector
	}
}

// withoutLabels selects the objects that have none of the labels.
func withoutLabels(keys ...string) string {
	s := labels.NewSelector()
	for _, k := range keys {
		r, err := labels.NewRequirement(k, selection.DoesNotExist, nil)
		if err != nil {
			panic(err) // the keys are constants
		}
		s = s.Add(*r)
	}
	return s.String()
}

// newInformer is every informer of the daemon: lw's kind as tweak selects
// it, the cache keeping what transform leaves of each object (trimCached
// unless said otherwise). Its store has no index: nothing here lists by
// namespace, and at 10,000 Services the namespace index of client-go's
// informers held 4 MB (a set of keys per namespace, a key string per
// object). The client says whether its watches can stream a watch-list.
func newInformer[L runtime.Object](client kubeapi.Client, lw kubeapi.ListWatcher[L], example runtime.Object, tweak func(*metav1.ListOptions), transform cache.TransformFunc) cache.SharedIndexInformer {
	informer := cache.NewSharedIndexInformerWithOptions(listWatcher(client, lw, tweak),
		example, cache.SharedIndexInformerOptions{Indexers: cache.Indexers{}})
	if transform == nil {
		transform = trimCached
	}
	// Only a started informer refuses a transform; this one is new.
	_ = informer.SetTransform(transform)
	return informer
}

// listWatcher lists and watches lw's kind as tweak selects it; the client
// says whether its watches can stream a watch-list.
func listWatcher[L runtime.Object](client kubeapi.Client, lw kubeapi.ListWatcher[L], tweak func(*metav1.ListOptions)) cache.ListerWatcher {
	options := func(o metav1.ListOptions) metav1.ListOptions {
		if tweak != nil {
			tweak(&o)
		}
		return o
	}
	listWatch := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			list, err := lw.List(ctx, options(o))
			if err != nil {
				return nil, err
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return lw.Watch(ctx, options(o))
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(listWatch, client)
}

// trimCached drops from a cached object what the proxier never reads. Every
// node caches every Service and EndpointSlice of the cluster, so this is
// memory per node at scale.
//
// An EndpointSlice becomes an ipvsproxy.EndpointSlice, which keeps only what
// the proxier reads (names, the service-name label, the trigger-time
// annotation, the address type, the ports, and per endpoint its first
// address, conditions, node name and hints) in one array of 16-byte
// endpoints (an IPv6 address 16 bytes more): at 10 endpoints a slice, a
// cached endpoint held 284 bytes as a trimmed discovery.Endpoint (the pod
// reference, zone and hostname dropped, node names and conditions shared);
// see BenchmarkCachedSliceMemory for what it holds now, alone and with the
// tracker's files of it.
//
// A Service becomes an ipvsproxy.Service, which keeps only what the
// proxier reads (names, creation time, the scheduler annotations, type,
// policies, cluster IPs parsed, ports, external IPs, source ranges, the load
// balancer's ingress IPs and the affinity timeout): see
// BenchmarkCachedServiceMemory for what it holds.
//
// Slices with equal port lists share one (cachedSlicePorts).
//
// The tracker is the only cache of both (trackedInformer); nothing else
// reads them. Of other objects it drops managedFields, often the largest
// part of an object written by server-side apply, and kubectl's
// last-applied-configuration annotation, a second copy of the whole object.
// The informer hands over a freshly decoded object, so changing it in place
// is safe; a compact object (a transform may be handed what it already
// made) and a tombstone are left as they are.
func trimCached(obj any) (any, error) {
	switch o := obj.(type) {
	case *ipvsproxy.EndpointSlice, *ipvsproxy.Service, cache.DeletedFinalStateUnknown:
		return obj, nil
	case *discovery.EndpointSlice:
		s := ipvsproxy.CompactEndpointSlice(o)
		s.Ports = cachedSlicePorts.Share(s.Ports)
		return s, nil
	case *v1.Service:
		return ipvsproxy.CompactService(o), nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil
	}
	m.SetManagedFields(nil)
	if a := m.GetAnnotations(); a != nil {
		if _, ok := a[v1.LastAppliedConfigAnnotation]; ok {
			delete(a, v1.LastAppliedConfigAnnotation)
			m.SetAnnotations(a)
		}
	}
	return obj, nil
}

// cachedSlicePorts shares the port lists of cached EndpointSlices: the
// EndpointSlice controller lists a Service's ports in each of its slices of
// up to 100 endpoints, so a Service of 10,000 ports and 100,000 endpoints
// was 1,000 copies of its ports, 400 MB on every node; shared, one. A list
// of fewer than 8 ports costs less than its entry in the table.
var cachedSlicePorts = sharedslices.New[ipvsproxy.SlicePort](8)

// keepNodeAddresses is the cluster-node informer's transform. The node guard
// reads only names and addresses: the cache keeps those alone (a Node's
// status carries images, conditions and volumes, kilobytes each).
func keepNodeAddresses(obj any) (any, error) {
	n, ok := obj.(*v1.Node)
	if !ok {
		return obj, nil
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion},
		Status:     v1.NodeStatus{Addresses: n.Status.Addresses},
	}, nil
}

// Where the node guard learns the other Nodes' addresses
// (--node-addresses-from).
const (
	nodeAddressesFromNodes        = "nodes"
	nodeAddressesFromSlices       = "endpointslices"
	defaultNodeAddressesNamespace = "ipvsproxy-node-addresses"
)

// nodeAddressSource is --node-addresses-from and --node-addresses-namespace.
type nodeAddressSource struct {
	fromSlices bool
	namespace  string
}

func parseNodeAddressSource(from, namespace string) (nodeAddressSource, error) {
	switch from {
	case nodeAddressesFromNodes:
		return nodeAddressSource{}, nil
	case nodeAddressesFromSlices:
		if namespace == "" {
			return nodeAddressSource{}, fmt.Errorf("--node-addresses-from=%s needs --node-addresses-namespace", from)
		}
		return nodeAddressSource{fromSlices: true, namespace: namespace}, nil
	}
	return nodeAddressSource{}, fmt.Errorf("--node-addresses-from=%q: want %s or %s", from, nodeAddressesFromNodes, nodeAddressesFromSlices)
}

// startInformers starts the daemon's informers, feeding tracker and health:
// every Service and EndpointSlice that is not another proxy's, this node's
// Node, the other Nodes' addresses for the node guard (from every Node, or
// from the slices that publish them: nodes), all required (their failures
// show on the health endpoints), and the ServiceCIDRs (optional, see
// watchServiceCIDRs). It returns what must have synced before the first
// full sync.
func startInformers(ctx context.Context, client kubeapi.Client, nodeName string, tracker *ipvsproxy.ChangeTracker, clusterNodes *ipvsproxy.ClusterNodes, nodes nodeAddressSource, access *apiAccess) ([]cache.InformerSynced, error) {
	selectServices, selectSlices, selectNode := informerSelections(nodeName)
	health := access.health
	sliceHandlers := []cache.ResourceEventHandler{tracker.EndpointSliceHandler()}
	if nodes.fromSlices {
		// The published Node addresses are EndpointSlices, which this
		// informer watches already: nothing more is watched.
		sliceHandlers = append(sliceHandlers, clusterNodes.PublishedHandler(nodes.namespace, nodeaddresses.ServiceName))
	}
	// Services and EndpointSlices are cached in the tracker alone
	// (trackedInformer); this Node and the others' addresses in shared
	// informers of their own, which are small.
	services := newTrackedInformer(client, client.Services(), &v1.Service{}, selectServices, tracker.ServiceKeys(), tracker.ServiceHandler())
	endpointSlices := newTrackedInformer(client, client.EndpointSlices(), &discovery.EndpointSlice{}, selectSlices, tracker.SliceKeys(), sliceHandlers...)
	thisNode := newInformer(client, client.Nodes(), &v1.Node{}, selectNode, nil)
	required := []struct {
		informer requiredInformer
		resource schema.GroupResource
		synced   cache.InformerSynced
	}{
		{services, v1.Resource("services"), services.HasSynced},
		{endpointSlices, discovery.Resource("endpointslices"), endpointSlices.HasSynced},
	}
	nodeHandlers := []cache.ResourceEventHandler{tracker.NodeHandler(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { health.SyncNode(asNode(obj)) },
		UpdateFunc: func(_, obj any) { health.SyncNode(asNode(obj)) },
		DeleteFunc: func(obj any) { health.SyncNode(nil) },
	}}
	shared := []struct {
		informer cache.SharedIndexInformer
		handlers []cache.ResourceEventHandler
	}{{thisNode, nodeHandlers}}
	if !nodes.fromSlices {
		// Every Node's addresses, for the node guard: no external IP may take one.
		shared = append(shared, struct {
			informer cache.SharedIndexInformer
			handlers []cache.ResourceEventHandler
		}{newInformer(client, client.Nodes(), &v1.Node{}, nil, keepNodeAddresses), []cache.ResourceEventHandler{clusterNodes.Handler()}})
	}
	for _, s := range shared {
		var synced cache.InformerSynced
		for i, h := range s.handlers {
			reg, err := s.informer.AddEventHandler(h)
			if err != nil {
				return nil, fmt.Errorf("watch nodes: %w", err)
			}
			// The first handler is the one to wait for: until it, not
			// only the cache, has seen every object.
			if i == 0 {
				synced = reg.HasSynced
			}
		}
		required = append(required, struct {
			informer requiredInformer
			resource schema.GroupResource
			synced   cache.InformerSynced
		}{s.informer, v1.Resource("nodes"), synced})
	}
	var synced []cache.InformerSynced
	for _, r := range required {
		if err := watchRequiredList(ctx, r.informer, r.resource, access); err != nil {
			return nil, fmt.Errorf("watch %s: %w", r.resource, err)
		}
		synced = append(synced, r.synced)
	}
	for _, r := range required {
		go r.informer.RunWithContext(ctx)
	}
	return append(synced, watchServiceCIDRs(ctx, client, tracker, access)), nil
}
