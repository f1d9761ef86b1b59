// Package kubeapi is the daemon's client of the API server: the four kinds it
// lists and watches (Services, EndpointSlices, Nodes, ServiceCIDRs), the
// Events it writes and one discovery read, on REST clients whose scheme holds
// those types alone.
//
// It stands in for client-go's clientset (kubernetes.Interface) and its
// informer factory. Those reach every API group: their typed clients, apply
// configurations, informers and listers, and a scheme that registers every
// group's types at start. That code is about half of a daemon binary that
// uses four kinds, and every node runs the daemon, so it is paid per node in
// file pages and start-up heap (docs/performance.md has the figures).
// Tests keep the clientset's fake behind the same interface
// (kubeapitest.FromClientset); only the daemon's binary is spared it.
package kubeapi

import (
	"context"
	"fmt"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/events"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networking "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// Client is what the daemon and inspect ask of the API server.
type Client interface {
	Services() ListWatcher[*v1.ServiceList]
	EndpointSlices() ListWatcher[*discovery.EndpointSliceList]
	Nodes() Nodes
	ServiceCIDRs() ListWatcher[*networking.ServiceCIDRList]
	// Events is where the Event recorder writes.
	Events() events.Sink
	// ServerResources is the API server's discovery document of one group
	// version ("networking.k8s.io/v1"); a group version it does not serve
	// is a NotFound error.
	ServerResources(ctx context.Context, groupVersion string) (*metav1.APIResourceList, error)
	// APIVersions is the API server's legacy discovery root (/api), whose
	// serverAddressByClientCIDRs carry the address it advertises.
	APIVersions(ctx context.Context) (*metav1.APIVersions, error)
}

// ListWatcher lists and watches one kind across all namespaces.
type ListWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Nodes also reads one Node by name (inspect; the daemon lists by name,
// which its ClusterRole grants).
type Nodes interface {
	ListWatcher[*v1.NodeList]
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Node, error)
}

// scheme holds the types this client reads and writes, and the meta types
// of lists, watches and options.
var (
	scheme         = runtime.NewScheme()
	codecs         = serializer.NewCodecFactory(scheme)
	parameterCodec = runtime.NewParameterCodec(scheme)
)

func init() {
	utilruntime.Must(v1.AddToScheme(scheme))
	utilruntime.Must(discovery.AddToScheme(scheme))
	utilruntime.Must(networking.AddToScheme(scheme))
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
}

// Scheme is the scheme of the kinds above: the Event recorder needs it to
// name the object an Event is about.
func Scheme() *runtime.Scheme { return scheme }

type client struct {
	services       resource[*v1.ServiceList]
	endpointSlices resource[*discovery.EndpointSliceList]
	nodes          nodes
	serviceCIDRs   resource[*networking.ServiceCIDRList]
	core           rest.Interface
	discovery      rest.Interface // the API server's root: discovery documents by path
}

// resource lists and watches one kind across all namespaces, as client-go's
// generated typed clients do (protobuf, the list options as query
// parameters, TimeoutSeconds as the request's timeout). client-go's generic
// typed client (gentype) would do the same, but it links client-go's fake
// clients' machinery (client-go/testing, managed fields, JSON patch): 300 KB
// of a binary every node runs.
type resource[L runtime.Object] struct {
	client  rest.Interface
	name    string
	newList func() L
}

func (r resource[L]) request(opts *metav1.ListOptions) *rest.Request {
	var timeout time.Duration
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	return r.client.Get().UseProtobufAsDefault().Resource(r.name).VersionedParams(opts, parameterCodec).Timeout(timeout)
}

func (r resource[L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	list := r.newList()
	err := r.request(&opts).Do(ctx).Into(list)
	return list, err
}

func (r resource[L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.request(&opts).Watch(ctx)
}

type nodes struct{ resource[*v1.NodeList] }

func (n nodes) Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Node, error) {
	node := &v1.Node{}
	err := n.client.Get().UseProtobufAsDefault().Resource(n.name).Name(name).VersionedParams(&opts, parameterCodec).Do(ctx).Into(node)
	return node, err
}

// New is the client for a REST configuration: one REST client per API group,
// each with the settings client-go's typed clients give their own, sharing
// one HTTP client (one connection pool) as the clientset's do.
func New(cfg *rest.Config) (Client, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("API server configuration: %w", err)
	}
	group := func(gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
		c := rest.CopyConfig(cfg)
		c.GroupVersion = &gv
		c.APIPath = apiPath
		c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, codecs).WithoutConversion()
		if c.UserAgent == "" {
			c.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		return rest.RESTClientForConfigAndClient(c, httpClient)
	}
	core, err := group(v1.SchemeGroupVersion, "/api")
	if err != nil {
		return nil, err
	}
	disc, err := group(discovery.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	netw, err := group(networking.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	root := rest.CopyConfig(cfg)
	root.GroupVersion, root.APIPath = nil, ""
	// Discovery documents are read as JSON, whatever the configured
	// content type of the objects.
	root.ContentType, root.AcceptContentTypes = "application/json", "application/json"
	root.NegotiatedSerializer = codecs.WithoutConversion()
	if root.UserAgent == "" {
		root.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rootClient, err := rest.UnversionedRESTClientForConfigAndClient(root, httpClient)
	if err != nil {
		return nil, err
	}
	return &client{
		services:       resource[*v1.ServiceList]{core, "services", func() *v1.ServiceList { return &v1.ServiceList{} }},
		endpointSlices: resource[*discovery.EndpointSliceList]{disc, "endpointslices", func() *discovery.EndpointSliceList { return &discovery.EndpointSliceList{} }},
		nodes:          nodes{resource[*v1.NodeList]{core, "nodes", func() *v1.NodeList { return &v1.NodeList{} }}},
		serviceCIDRs:   resource[*networking.ServiceCIDRList]{netw, "servicecidrs", func() *networking.ServiceCIDRList { return &networking.ServiceCIDRList{} }},
		core:           core,
		discovery:      rootClient,
	}, nil
}

func (c *client) Services() ListWatcher[*v1.ServiceList] { return c.services }
func (c *client) EndpointSlices() ListWatcher[*discovery.EndpointSliceList] {
	return c.endpointSlices
}
func (c *client) Nodes() Nodes                                           { return c.nodes }
func (c *client) ServiceCIDRs() ListWatcher[*networking.ServiceCIDRList] { return c.serviceCIDRs }
func (c *client) Events() events.Sink                                    { return eventSink{c.core} }

func (c *client) ServerResources(ctx context.Context, groupVersion string) (*metav1.APIResourceList, error) {
	path := "/apis/" + groupVersion
	if groupVersion == "v1" {
		path = "/api/v1"
	}
	list := &metav1.APIResourceList{}
	if err := c.discovery.Get().AbsPath(path).Do(ctx).Into(list); err != nil {
		return nil, err
	}
	return list, nil
}

func (c *client) APIVersions(ctx context.Context) (*metav1.APIVersions, error) {
	versions := &metav1.APIVersions{}
	if err := c.discovery.Get().AbsPath("/api").Do(ctx).Into(versions); err != nil {
		return nil, err
	}
	return versions, nil
}

// eventSink writes Events as client-go's EventSinkImpl does, each into its
// own namespace; a repeat is a JSON merge patch (events.Sink).
type eventSink struct{ core rest.Interface }

func (s eventSink) Create(e *v1.Event) (*v1.Event, error) {
	out := &v1.Event{}
	err := s.core.Post().NamespaceIfScoped(e.Namespace, e.Namespace != "").Resource("events").Body(e).Do(context.Background()).Into(out)
	return out, err
}

func (s eventSink) Patch(e *v1.Event, data []byte) (*v1.Event, error) {
	out := &v1.Event{}
	err := s.core.Patch(types.MergePatchType).NamespaceIfScoped(e.Namespace, e.Namespace != "").Resource("events").Name(e.Name).
		Body(data).Do(context.Background()).Into(out)
	return out, err
}

// SliceWriter reads and writes EndpointSlices namespace by namespace: the
// Node address publisher's (internal/daemon/nodeaddresses), never the daemon's.
type SliceWriter struct{ client rest.Interface }

// NewSliceWriter is the EndpointSlice writer for a REST configuration.
func NewSliceWriter(cfg *rest.Config) (*SliceWriter, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion, c.APIPath = &discovery.SchemeGroupVersion, "/apis"
	c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, codecs).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("API server configuration: %w", err)
	}
	return &SliceWriter{client: rc}, nil
}

func (w *SliceWriter) List(ctx context.Context, namespace string, opts metav1.ListOptions) (*discovery.EndpointSliceList, error) {
	list := &discovery.EndpointSliceList{}
	err := w.client.Get().UseProtobufAsDefault().Namespace(namespace).Resource("endpointslices").VersionedParams(&opts, parameterCodec).Do(ctx).Into(list)
	return list, err
}

func (w *SliceWriter) Create(ctx context.Context, s *discovery.EndpointSlice) (*discovery.EndpointSlice, error) {
	out := &discovery.EndpointSlice{}
	err := w.client.Post().Namespace(s.Namespace).Resource("endpointslices").Body(s).Do(ctx).Into(out)
	return out, err
}

func (w *SliceWriter) Update(ctx context.Context, s *discovery.EndpointSlice) (*discovery.EndpointSlice, error) {
	out := &discovery.EndpointSlice{}
	err := w.client.Put().Namespace(s.Namespace).Resource("endpointslices").Name(s.Name).Body(s).Do(ctx).Into(out)
	return out, err
}

func (w *SliceWriter) Delete(ctx context.Context, namespace, name string) error {
	return w.client.Delete().Namespace(namespace).Resource("endpointslices").Name(name).Do(ctx).Error()
}
