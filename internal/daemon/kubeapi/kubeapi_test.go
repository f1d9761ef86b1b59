package kubeapi

import (
	"context"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/events"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networking "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

const protobuf = "application/vnd.kubernetes.protobuf"

// request is what the fake API server saw.
type request struct {
	method, path, query, contentType, accept string
	body                                     []byte
}

// apiServer answers as kube-apiserver does for the paths this client uses,
// in the encoding the request accepts (protobuf or JSON), and records every
// request.
type apiServer struct {
	t        *testing.T
	mu       sync.Mutex
	requests []request
	objects  map[string]runtime.Object // by path
	gv       map[string]schema.GroupVersion
}

func (s *apiServer) seen() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]request(nil), s.requests...)
}

func (s *apiServer) encode(w http.ResponseWriter, r *http.Request, gv schema.GroupVersion, obj runtime.Object) {
	mediaType := "application/json"
	if strings.Contains(r.Header.Get("Accept"), protobuf) {
		mediaType = protobuf
	}
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		s.t.Errorf("no serializer for %s", mediaType)
		return
	}
	serializer := info.Serializer
	if r.URL.Query().Get("watch") == "true" {
		serializer = info.StreamSerializer.Serializer
	}
	w.Header().Set("Content-Type", mediaType)
	if err := codecs.EncoderForVersion(serializer, gv).Encode(obj, w); err != nil {
		s.t.Errorf("encode %T: %v", obj, err)
	}
}

func (s *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), r.Header.Get("Accept"), body})
	s.mu.Unlock()
	if r.URL.Path == "/api" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"192.0.2.100:6443"}]}`)
		return
	}
	if r.URL.Path == "/apis/networking.k8s.io/v1" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"networking.k8s.io/v1",`+
			`"resources":[{"name":"servicecidrs","singularName":"servicecidr","namespaced":false,"kind":"ServiceCIDR","verbs":["list","watch"]}]}`)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/events") || strings.Contains(r.URL.Path, "/events/") {
		// Echo the Event written: decoded as the server would, by its type.
		mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		e := &v1.Event{}
		if r.Method == http.MethodPatch {
			e.Name, e.Namespace, e.Message = "patched", "default", string(body)
		} else {
			info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
			if !ok {
				http.Error(w, "unsupported media type "+mediaType, http.StatusUnsupportedMediaType)
				return
			}
			if _, _, err := info.Serializer.Decode(body, nil, e); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		s.encode(w, r, v1.SchemeGroupVersion, e)
		return
	}
	obj, ok := s.objects[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.URL.Query().Get("watch") == "true" {
		w.Header().Set("Content-Type", "application/json")
		mediaType := "application/json"
		if strings.Contains(r.Header.Get("Accept"), protobuf) {
			mediaType = protobuf
		}
		info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
		w.Header().Set("Content-Type", mediaType)
		framer := info.StreamSerializer.Framer.NewFrameWriter(w)
		encoder := codecs.EncoderForVersion(info.StreamSerializer.Serializer, s.gv[r.URL.Path])
		var item strings.Builder
		if err := codecs.EncoderForVersion(info.Serializer, s.gv[r.URL.Path]).Encode(obj, &item); err != nil {
			s.t.Errorf("encode %T: %v", obj, err)
		}
		event := &metav1.WatchEvent{Type: string(watch.Added), Object: runtime.RawExtension{Raw: []byte(item.String())}}
		if err := encoder.Encode(event, framer); err != nil {
			s.t.Errorf("encode the watch event: %v", err)
		}
		return
	}
	s.encode(w, r, s.gv[r.URL.Path], obj)
}

func newAPIServer(t *testing.T) (*apiServer, *httptest.Server) {
	s := &apiServer{t: t, objects: map[string]runtime.Object{
		"/api/v1/services": &v1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "7"},
			Items: []v1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
				Spec: v1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []v1.ServicePort{{Port: 80}}}}}},
		"/apis/discovery.k8s.io/v1/endpointslices": &discovery.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-abcde"}, AddressType: discovery.AddressTypeIPv6,
			Endpoints: []discovery.Endpoint{{Addresses: []string{"2001:db8::5"}}}},
		"/api/v1/nodes":       &v1.NodeList{Items: []v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node1"}}}},
		"/api/v1/nodes/node1": &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}},
		"/apis/networking.k8s.io/v1/servicecidrs": &networking.ServiceCIDRList{Items: []networking.ServiceCIDR{{
			ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networking.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/16", "2001:db8:96::/112"}}}}},
	}, gv: map[string]schema.GroupVersion{
		"/api/v1/services":                         v1.SchemeGroupVersion,
		"/apis/discovery.k8s.io/v1/endpointslices": discovery.SchemeGroupVersion,
		"/api/v1/nodes":                            v1.SchemeGroupVersion,
		"/api/v1/nodes/node1":                      v1.SchemeGroupVersion,
		"/apis/networking.k8s.io/v1/servicecidrs":  networking.SchemeGroupVersion,
	}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

// Every read and write the daemon makes reaches the path client-go's typed
// clients use and decodes, in protobuf (the daemon's default) and in JSON.
func TestClientReadsAndWritesThroughTheAPIPaths(t *testing.T) {
	for _, contentType := range []string{protobuf, "application/json"} {
		t.Run(contentType, func(t *testing.T) {
			s, srv := newAPIServer(t)
			cfg := &rest.Config{Host: srv.URL}
			cfg.ContentType = contentType
			if contentType == protobuf {
				cfg.AcceptContentTypes = protobuf + ",application/json"
			}
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			services, err := c.Services().List(ctx, metav1.ListOptions{LabelSelector: "!service.kubernetes.io/service-proxy-name"})
			if err != nil || len(services.Items) != 1 || services.Items[0].Spec.ClusterIP != "10.96.0.10" || services.ResourceVersion != "7" {
				t.Fatalf("Services: %+v, %v", services, err)
			}
			w, err := c.EndpointSlices().Watch(ctx, metav1.ListOptions{ResourceVersion: "7"})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case e := <-w.ResultChan():
				slice, ok := e.Object.(*discovery.EndpointSlice)
				if e.Type != watch.Added || !ok || slice.Name != "web-abcde" || slice.Endpoints[0].Addresses[0] != "2001:db8::5" {
					t.Errorf("EndpointSlice watch event: %s %#v", e.Type, e.Object)
				}
			case <-ctx.Done():
				t.Fatal("no watch event")
			}
			w.Stop()
			nodes, err := c.Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=node1"})
			if err != nil || len(nodes.Items) != 1 {
				t.Fatalf("Nodes: %+v, %v", nodes, err)
			}
			if n, err := c.Nodes().Get(ctx, "node1", metav1.GetOptions{}); err != nil || n.Name != "node1" {
				t.Fatalf("Node: %+v, %v", n, err)
			}
			cidrs, err := c.ServiceCIDRs().List(ctx, metav1.ListOptions{})
			if err != nil || len(cidrs.Items) != 1 || len(cidrs.Items[0].Spec.CIDRs) != 2 {
				t.Fatalf("ServiceCIDRs: %+v, %v", cidrs, err)
			}
			resources, err := c.ServerResources(ctx, "networking.k8s.io/v1")
			if err != nil || len(resources.APIResources) != 1 || resources.APIResources[0].Name != "servicecidrs" {
				t.Fatalf("discovery: %+v, %v", resources, err)
			}
			if _, err := c.ServerResources(ctx, "no.such.group/v1"); !apierrors.IsNotFound(err) {
				t.Errorf("discovery of a group the server does not serve: %v, want NotFound", err)
			}
			versions, err := c.APIVersions(ctx)
			if err != nil || len(versions.ServerAddressByClientCIDRs) != 1 || versions.ServerAddressByClientCIDRs[0].ServerAddress != "192.0.2.100:6443" {
				t.Fatalf("/api: %+v, %v", versions, err)
			}
			event := &v1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web.1"}, Reason: "PortConflict", Message: "taken"}
			if got, err := c.Events().Create(event); err != nil || got.Reason != "PortConflict" || got.Message != "taken" {
				t.Fatalf("Event create: %+v, %v", got, err)
			}
			if _, err := c.Events().Patch(event, []byte(`{"count":2}`)); err != nil {
				t.Fatalf("Event patch: %v", err)
			}

			want := []struct{ method, path, query, contentType string }{
				{"GET", "/api/v1/services", "labelSelector=%21service.kubernetes.io%2Fservice-proxy-name", ""},
				{"GET", "/apis/discovery.k8s.io/v1/endpointslices", "resourceVersion=7&watch=true", ""},
				{"GET", "/api/v1/nodes", "fieldSelector=metadata.name%3Dnode1", ""},
				{"GET", "/api/v1/nodes/node1", "", ""},
				{"GET", "/apis/networking.k8s.io/v1/servicecidrs", "", ""},
				{"GET", "/apis/networking.k8s.io/v1", "", ""},
				{"GET", "/apis/no.such.group/v1", "", ""},
				{"GET", "/api", "", ""},
				{"POST", "/api/v1/namespaces/tenant/events", "", contentType},
				{"PATCH", "/api/v1/namespaces/tenant/events/web.1", "", "application/merge-patch+json"},
			}
			seen := s.seen()
			if len(seen) != len(want) {
				t.Fatalf("%d requests, want %d: %+v", len(seen), len(want), seen)
			}
			for i, w := range want {
				r := seen[i]
				if r.method != w.method || r.path != w.path || r.query != w.query || (w.contentType != "" && r.contentType != w.contentType) {
					t.Errorf("request %d: %s %s?%s (%s), want %s %s?%s (%s)", i, r.method, r.path, r.query, r.contentType, w.method, w.path, w.query, w.contentType)
				}
				if strings.HasPrefix(r.path, "/apis/networking.k8s.io/v1") && r.path == "/apis/networking.k8s.io/v1" && r.accept != "application/json" {
					t.Errorf("discovery asked for %q, want JSON", r.accept)
				}
				if r.path == "/api/v1/services" && contentType == protobuf && !strings.HasPrefix(r.accept, protobuf) {
					t.Errorf("a list asked for %q, want protobuf first", r.accept)
				}
			}
		})
	}
}

// The recorder names the object of an Event through the scheme: a Service's
// Event is about the Service.
func TestSchemeNamesTheObjectsOfEvents(t *testing.T) {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web", UID: "u1"}}
	sink := &recordingSink{}
	recorder := events.New(sink, Scheme(), v1.EventSource{Component: "ipvsproxy"})
	defer recorder.Shutdown()
	recorder.Event(svc, v1.EventTypeWarning, "PortConflict", "taken")
	deadline := time.Now().Add(5 * time.Second)
	for sink.count() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	e := sink.first()
	if e == nil {
		t.Fatal("no Event written")
	}
	if e.InvolvedObject.Kind != "Service" || e.InvolvedObject.APIVersion != "v1" || e.InvolvedObject.Name != "web" || e.Namespace != "tenant" {
		t.Errorf("Event about %+v in %q, want the Service tenant/web", e.InvolvedObject, e.Namespace)
	}
}

type recordingSink struct {
	mu     sync.Mutex
	events []*v1.Event
}

func (s *recordingSink) Create(e *v1.Event) (*v1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, e)
	return e, nil
}
func (s *recordingSink) Patch(e *v1.Event, _ []byte) (*v1.Event, error) { return e, nil }
func (s *recordingSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.events)
}
func (s *recordingSink) first() *v1.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.events) == 0 {
		return nil
	}
	return s.events[0]
}
