package nodeaddresses

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// SliceWriter reads and writes the EndpointSlices of one namespace.
type SliceWriter interface {
	List(ctx context.Context, namespace string, opts metav1.ListOptions) (*discovery.EndpointSliceList, error)
	Create(ctx context.Context, slice *discovery.EndpointSlice) (*discovery.EndpointSlice, error)
	Update(ctx context.Context, slice *discovery.EndpointSlice) (*discovery.EndpointSlice, error)
	Delete(ctx context.Context, namespace, name string) error
}

// Publisher keeps the published slices of its namespace in step with the
// Nodes its handler is given.
type Publisher struct {
	namespace string
	writer    SliceWriter
	// Resync is how often the slices are read back and repaired when no
	// Node's address changed (someone edited or deleted one).
	Resync time.Duration

	mu      sync.Mutex
	nodes   map[string][]netip.Addr
	changed chan struct{}
}

// New is a Publisher writing into namespace through w.
func New(namespace string, w SliceWriter) *Publisher {
	return &Publisher{namespace: namespace, writer: w, Resync: 10 * time.Minute, nodes: map[string][]netip.Addr{}, changed: make(chan struct{}, 1)}
}

// ownSelector selects the published slices and nothing else.
func ownSelector() string {
	return labels.SelectorFromSet(labels.Set{discovery.LabelServiceName: ServiceName, discovery.LabelManagedBy: managedBy}).String()
}

// SetNode records node's addresses; a Node whose addresses did not change
// (its kubelet's status reports) asks for no write.
func (p *Publisher) SetNode(node *v1.Node) {
	if node == nil {
		return
	}
	addrs := Addresses(node)
	p.mu.Lock()
	old, had := p.nodes[node.Name]
	p.nodes[node.Name] = addrs
	p.mu.Unlock()
	if !had || !slices.Equal(old, addrs) {
		p.poke()
	}
}

// DeleteNode forgets a Node.
func (p *Publisher) DeleteNode(name string) {
	p.mu.Lock()
	_, had := p.nodes[name]
	delete(p.nodes, name)
	p.mu.Unlock()
	if had {
		p.poke()
	}
}

func (p *Publisher) poke() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// Handler is where an informer on all Nodes sends its events.
func (p *Publisher) Handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.SetNode(asNode(obj)) },
		UpdateFunc: func(_, obj any) { p.SetNode(asNode(obj)) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if n := asNode(obj); n != nil {
				p.DeleteNode(n.Name)
			}
		},
	}
}

func asNode(obj any) *v1.Node {
	n, _ := obj.(*v1.Node)
	return n
}

// Publish writes what differs between the published slices and the Nodes
// known, and removes published slices no Node needs: one read of the
// namespace's published slices, then a write per slice that changed. It
// returns how many it wrote.
func (p *Publisher) Publish(ctx context.Context) (writes int, err error) {
	p.mu.Lock()
	want := Slices(p.namespace, maps.Clone(p.nodes))
	p.mu.Unlock()
	list, err := p.writer.List(ctx, p.namespace, metav1.ListOptions{LabelSelector: ownSelector()})
	if err != nil {
		return 0, fmt.Errorf("list the published EndpointSlices of %s: %w", p.namespace, err)
	}
	var errs []error
	for i := range list.Items {
		have := &list.Items[i]
		w, wanted := want[have.Name]
		delete(want, have.Name)
		switch {
		case !wanted:
			writes++
			if err := p.writer.Delete(ctx, p.namespace, have.Name); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete EndpointSlice %s/%s: %w", p.namespace, have.Name, err))
			}
		case !sameEndpoints(have, w):
			writes++
			w.ResourceVersion = have.ResourceVersion
			if _, err := p.writer.Update(ctx, w); err != nil {
				errs = append(errs, fmt.Errorf("update EndpointSlice %s/%s: %w", p.namespace, w.Name, err))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		writes++
		if _, err := p.writer.Create(ctx, want[name]); err != nil {
			errs = append(errs, fmt.Errorf("create EndpointSlice %s/%s: %w", p.namespace, name, err))
		}
	}
	if len(errs) > 0 {
		return writes, fmt.Errorf("%d of %d writes failed, the first: %w", len(errs), writes, errs[0])
	}
	return writes, nil
}

// Run publishes once synced reports the Node informer synced, again after
// every change of a Node's addresses (changes within a second together),
// every Resync, and after a failure with backoff, until ctx ends.
func (p *Publisher) Run(ctx context.Context, synced cache.InformerSynced) {
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		return
	}
	backoff := time.Second
	resync := time.NewTimer(0)
	defer resync.Stop()
	for {
		writes, err := p.Publish(ctx)
		next := p.Resync
		if err != nil {
			klog.ErrorS(err, "Publishing the Nodes' addresses failed; retrying", "in", backoff)
			next, backoff = backoff, min(2*backoff, time.Minute)
		} else {
			backoff = time.Second
			if writes > 0 {
				klog.InfoS("Published the Nodes' addresses", "namespace", p.namespace, "writes", writes)
			}
		}
		resync.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-resync.C:
		case <-p.changed:
			// Nodes registering together are written together.
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}
