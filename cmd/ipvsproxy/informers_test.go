package main

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/kubeapi/kubeapitest"
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/nodeaddresses"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// The daemon's caches hold Services without managedFields and kubectl's
// copy of the object, and keep everything the proxier reads (here the
// scheduler annotation and the spec).
func TestInformerCachesTrimWhatTheProxierNeverReads(t *testing.T) {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web",
			Annotations: map[string]string{
				v1.LastAppliedConfigAnnotation: `{"kind":"Service","metadata":{"name":"web"}}`,
				ipvsproxy.AnnotationScheduler:  "rr",
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply,
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:ports":{}}}`)}}},
		},
		Spec: v1.ServiceSpec{ClusterIP: "10.96.0.20", Ports: []v1.ServicePort{{Port: 80}}},
	}
	client := kubeapitest.FromClientset(fake.NewClientset(svc))
	tracker := ipvsproxy.NewChangeTracker("node1", nil)
	informer := newTrackedInformer(client, client.Services(), &v1.Service{}, nil, tracker.ServiceKeys(), tracker.ServiceHandler())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the Service informer did not sync")
	}
	obj, ok, err := tracker.ServiceKeys().GetByKey("default/web")
	if err != nil || !ok {
		t.Fatalf("cached Service: ok=%v err=%v", ok, err)
	}
	compact, ok := obj.(*ipvsproxy.Service)
	if !ok {
		t.Fatalf("cached Service is a %T, want the compact *ipvsproxy.Service", obj)
	}
	got := compact.ToService()
	if want := map[string]string{ipvsproxy.AnnotationScheduler: "rr"}; !maps.Equal(got.Annotations, want) {
		t.Errorf("cached Service's annotations %v, want %v alone", got.Annotations, want)
	}
	if got.Spec.ClusterIP != "10.96.0.20" || len(got.Spec.Ports) != 1 || got.Spec.Ports[0].Port != 80 {
		t.Errorf("cached Service lost what the proxier reads: %+v", got.Spec)
	}
}

// A cached EndpointSlice keeps what the proxier reads (the service-name label,
// the trigger-time annotation, addresses, conditions, node name, hints, ports)
// and loses the pods' references and the rest; a Service loses its selector.
func TestInformerCachesTrimSlicesAndServices(t *testing.T) {
	pod := "web-7d4b9c6f5-x2x7q"
	slice := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-abcde", GenerateName: "web-",
			Labels:          map[string]string{discovery.LabelServiceName: "web", discovery.LabelManagedBy: "endpointslice-controller.k8s.io", "app": "web"},
			Annotations:     map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": "2026-12-02T10:00:00Z"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web", UID: "0b5e3c1a-0000-4000-8000-000000000001"}}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints: []discovery.Endpoint{{
			Addresses:  []string{"10.244.1.5"},
			Conditions: discovery.EndpointConditions{Ready: ptr.To(true)},
			NodeName:   ptr.To("node1"), Zone: ptr.To("zone-a"), Hostname: ptr.To(pod),
			Hints:     &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-a"}}},
			TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod, UID: "0b5e3c1a-0000-4000-8000-000000000002"},
		}},
		Ports: []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080))}},
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Labels: map[string]string{"app": "web"}},
		Spec:       v1.ServiceSpec{ClusterIP: "10.96.0.20", Selector: map[string]string{"app": "web"}, Ports: []v1.ServicePort{{Port: 80}}},
	}
	gotSlice, err := trimCached(slice.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	compact, ok := gotSlice.(*ipvsproxy.EndpointSlice)
	if !ok {
		t.Fatalf("cached EndpointSlice is a %T, want the compact *ipvsproxy.EndpointSlice", gotSlice)
	}
	want := slice.DeepCopy()
	want.GenerateName, want.OwnerReferences = "", nil
	want.Labels = map[string]string{discovery.LabelServiceName: "web"}
	want.Endpoints[0].TargetRef, want.Endpoints[0].Hostname, want.Endpoints[0].Zone = nil, nil, nil
	want.Ports[0].Protocol = ptr.To(v1.ProtocolTCP) // the API's default, applied
	if diff := cmp.Diff(want, compact.ToDiscovery()); diff != "" {
		t.Errorf("cached EndpointSlice (-want +got):\n%s", diff)
	}
	gotSvc, err := trimCached(svc.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	compactSvc, ok := gotSvc.(*ipvsproxy.Service)
	if !ok {
		t.Fatalf("cached Service is a %T, want the compact *ipvsproxy.Service", gotSvc)
	}
	wantSvc := svc.DeepCopy()
	wantSvc.Labels, wantSvc.Spec.Selector = nil, nil
	wantSvc.Spec.ClusterIPs = []string{wantSvc.Spec.ClusterIP} // always listed
	if diff := cmp.Diff(wantSvc, compactSvc.ToService()); diff != "" {
		t.Errorf("cached Service (-want +got):\n%s", diff)
	}
}

// A tombstone has no object metadata of its own: it passes unchanged, and
// so does a slice or Service the transform already made compact.
func TestTrimCachedLeavesTombstones(t *testing.T) {
	tomb := cache.DeletedFinalStateUnknown{Key: "default/web"}
	got, err := trimCached(tomb)
	if err != nil || got != tomb {
		t.Fatalf("trimCached(tombstone) = %v, %v", got, err)
	}
	compact := ipvsproxy.CompactEndpointSlice(&discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-abcde"}})
	if got, err := trimCached(compact); err != nil || got != compact {
		t.Fatalf("trimCached(compact slice) = %v, %v", got, err)
	}
	compactSvc := ipvsproxy.CompactService(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}})
	if got, err := trimCached(compactSvc); err != nil || got != compactSvc {
		t.Fatalf("trimCached(compact Service) = %v, %v", got, err)
	}
}

// The all-Nodes cache of the node guard keeps names and addresses only.
func TestClusterNodeCacheKeepsAddressesOnly(t *testing.T) {
	in := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node2", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"x": "y"}},
		Spec:       v1.NodeSpec{PodCIDRs: []string{"10.244.2.0/24"}},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "198.51.100.2"}},
			Images: []v1.ContainerImage{{Names: []string{"registry.example/big:1"}, SizeBytes: 1 << 30}}},
	}
	out, err := keepNodeAddresses(in)
	if err != nil {
		t.Fatal(err)
	}
	n := out.(*v1.Node)
	if n.Name != "node2" || len(n.Status.Addresses) != 1 || n.Labels != nil || n.Annotations != nil || n.Spec.PodCIDRs != nil || n.Status.Images != nil {
		t.Errorf("cached node keeps more than its name and addresses: %+v", n)
	}
}

// The daemon's informers and `inspect --kubeconfig` share these options:
// another proxy's objects and headless Services' slices are left out.
func TestListOptionsLeaveOutOtherProxiesAndHeadless(t *testing.T) {
	for _, c := range []struct {
		opts   metav1.ListOptions
		labels map[string]string
		want   bool
	}{
		{serviceListOptions(), nil, true},
		{serviceListOptions(), map[string]string{labelServiceProxyName: "other"}, false},
		{serviceListOptions(), map[string]string{labelHeadless: ""}, true},
		{endpointSliceListOptions(), map[string]string{discovery.LabelServiceName: "web"}, true},
		{endpointSliceListOptions(), map[string]string{labelServiceProxyName: "other"}, false},
		{endpointSliceListOptions(), map[string]string{labelHeadless: ""}, false},
	} {
		sel, err := labels.Parse(c.opts.LabelSelector)
		if err != nil {
			t.Fatal(err)
		}
		if got := sel.Matches(labels.Set(c.labels)); got != c.want {
			t.Errorf("%q selects %v: %v, want %v", c.opts.LabelSelector, c.labels, got, c.want)
		}
	}
	if got := nodeListOptions("node1").FieldSelector; got != "metadata.name=node1" {
		t.Errorf("node field selector %q", got)
	}
}

// The reflector calls the tweak with the options of each list and watch it
// makes (a resource version to resume from, bookmarks, the watch-list's
// initial events, paging): the tweak sets the selectors and nothing else.
// Replacing the options made every watch start over from nothing, and the
// watch-list never received the bookmark that ends its initial events, so
// the informers never synced (the dual-stack conformance cluster's
// DaemonSet stayed unready).
func TestInformerSelectionsKeepTheReflectorsOptions(t *testing.T) {
	services, slices, node := informerSelections("node1")
	for name, c := range map[string]struct {
		tweak func(*metav1.ListOptions)
		want  metav1.ListOptions
	}{
		"services":       {services, serviceListOptions()},
		"endpointslices": {slices, endpointSliceListOptions()},
		"node":           {node, nodeListOptions("node1")},
	} {
		initial, timeout := true, int64(300)
		o := metav1.ListOptions{ResourceVersion: "42", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, Watch: true,
			AllowWatchBookmarks: true, SendInitialEvents: &initial, TimeoutSeconds: &timeout, Limit: 500, Continue: "next"}
		want := o
		want.LabelSelector, want.FieldSelector = c.want.LabelSelector, c.want.FieldSelector
		c.tweak(&o)
		if !reflect.DeepEqual(o, want) {
			t.Errorf("%s: the tweak made %+v of the reflector's options; want %+v", name, o, want)
		}
	}
}

// The Service and EndpointSlice informers keep no cache of their own: the
// tracker holds each object once, trimmed (a shared informer's store held a
// second reference under a key string), and the informers still list with
// the daemon's selections.
func TestServiceAndSliceInformersCacheInTheTrackerAlone(t *testing.T) {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	other := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "theirs",
		Labels: map[string]string{labelServiceProxyName: "another-proxy"}}}
	slice := &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-abcde",
		Labels: map[string]string{discovery.LabelServiceName: "web"}}, AddressType: discovery.AddressTypeIPv4,
		Endpoints: []discovery.Endpoint{{Addresses: []string{"10.244.1.5"}, TargetRef: &v1.ObjectReference{Kind: "Pod", Name: "web-1"}}}}
	client := kubeapitest.FromClientset(fake.NewClientset(svc, other, slice))
	selectServices, selectSlices, _ := informerSelections("node1")
	tracker := ipvsproxy.NewChangeTracker("node1", nil)
	services := newTrackedInformer(client, client.Services(), &v1.Service{}, selectServices, tracker.ServiceKeys(), tracker.ServiceHandler())
	slices := newTrackedInformer(client, client.EndpointSlices(), &discovery.EndpointSlice{}, selectSlices, tracker.SliceKeys(), tracker.EndpointSliceHandler())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go services.RunWithContext(ctx)
	go slices.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), services.HasSynced, slices.HasSynced) {
		t.Fatal("the informers did not sync")
	}
	if keys := tracker.ServiceKeys().ListKeys(); len(keys) != 1 || keys[0] != "default/web" {
		t.Errorf("the Service cache holds %v, want default/web alone (another proxy's Service left out)", keys)
	}
	if obj, ok, _ := tracker.ServiceKeys().GetByKey("default/web"); !ok {
		t.Errorf("the cached Service is missing: %v", tracker.ServiceKeys().ListKeys())
	} else if _, compact := obj.(*ipvsproxy.Service); !compact {
		t.Errorf("the cached Service is not the compact one: %#v", obj)
	}
	if obj, ok, _ := tracker.SliceKeys().GetByKey("default/web-abcde"); !ok {
		t.Errorf("the cached EndpointSlice is missing: %v", tracker.SliceKeys().ListKeys())
	} else if s, compact := obj.(*ipvsproxy.EndpointSlice); !compact || s.Endpoints[0].NodeName() != "" {
		t.Errorf("the cached EndpointSlice is not the compact one: %#v", obj)
	}
}

// BenchmarkCachedSliceMemory reports the heap a cached EndpointSlice of 10
// endpoints holds after trimCached, decoded from protobuf as the informer
// decodes it (every pointer its own allocation), per endpoint.
func BenchmarkCachedSliceMemory(b *testing.B) {
	b.Run("cache", func(b *testing.B) { benchmarkSliceMemory(b, false) })
	// The same slices filed by the tracker too, which shares them with
	// the cache: what the daemon holds per endpoint for both.
	b.Run("cache+tracker", func(b *testing.B) { benchmarkSliceMemory(b, true) })
}

func benchmarkSliceMemory(b *testing.B, track bool) {
	const slices, perSlice = 2000, 10
	encoded := make([][]byte, slices)
	for i := range encoded {
		s := &discovery.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("svc-%d-abcde", i),
				Labels: map[string]string{discovery.LabelServiceName: fmt.Sprintf("svc-%d", i)}},
			AddressType: discovery.AddressTypeIPv4,
		}
		for j := range perSlice {
			s.Endpoints = append(s.Endpoints, discovery.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.244.%d.%d", i%250, j)},
				Conditions: discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
				NodeName:   ptr.To(fmt.Sprintf("node-%d", (i*perSlice+j)%100)), Zone: ptr.To("zone-a"),
				TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: "bench", Name: fmt.Sprintf("pod-%d-%d", i, j)},
			})
		}
		data, err := s.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		encoded[i] = data
	}
	held := heapHeldByCache(b, encoded, track, false, func(data []byte) (any, error) {
		s := &discovery.EndpointSlice{}
		return s, s.Unmarshal(data)
	}, func(t *ipvsproxy.ChangeTracker) cache.ResourceEventHandler { return t.EndpointSliceHandler() })
	b.ReportMetric(held/(slices*perSlice), "held-B/endpoint")
}

// Cached endpoints share their node name; their conditions stay what was
// decoded, unset ones unset.
func TestCachedEndpointsShareNodeNamesAndConditions(t *testing.T) {
	mk := func(name, node string, ready bool) *discovery.EndpointSlice {
		return &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
			Endpoints: []discovery.Endpoint{{Addresses: []string{"10.244.1.5"}, NodeName: ptr.To(node),
				Conditions: discovery.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(ready)}}}}
	}
	a, _ := trimCached(mk("a", "node-shared-1", true))
	b, _ := trimCached(mk("b", "node-shared-1", false))
	ea, eb := a.(*ipvsproxy.EndpointSlice).ToDiscovery().Endpoints[0], b.(*ipvsproxy.EndpointSlice).ToDiscovery().Endpoints[0]
	if ea.NodeName != eb.NodeName || *ea.NodeName != "node-shared-1" {
		t.Errorf("node names not shared or changed: %p %q, %p %q", ea.NodeName, *ea.NodeName, eb.NodeName, *eb.NodeName)
	}
	if !*ea.Conditions.Ready || *eb.Conditions.Ready || !*ea.Conditions.Serving || *eb.Conditions.Serving || ea.Conditions.Terminating != nil {
		t.Errorf("conditions changed: %+v, %+v", ea.Conditions, eb.Conditions)
	}
}

// Through the daemon's informer on a fake API server, the tracker follows a slice
// the cache holds compact: added, updated (the store reads its resource
// version and key through meta.Accessor) and deleted.
func TestTrackerFollowsCompactSlicesThroughTheInformer(t *testing.T) {
	slice := &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-abcde", ResourceVersion: "1",
		Labels: map[string]string{discovery.LabelServiceName: "web"}}, AddressType: discovery.AddressTypeIPv4,
		Endpoints: []discovery.Endpoint{{Addresses: []string{"10.244.1.5"}}}}
	fakeClient := fake.NewClientset(slice)
	client := kubeapitest.FromClientset(fakeClient)
	tracker := ipvsproxy.NewChangeTracker("node1", nil)
	_, selectSlices, _ := informerSelections("node1")
	informer := newTrackedInformer(client, client.EndpointSlices(), &discovery.EndpointSlice{}, selectSlices, tracker.SliceKeys(), tracker.EndpointSliceHandler())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	web := types.NamespacedName{Namespace: "default", Name: "web"}
	addresses := func() []string {
		_, slices := tracker.Input(web)
		var out []string
		for _, s := range slices {
			for i := range s.Endpoints {
				a, _, _ := s.Address(i)
				out = append(out, a.String())
			}
		}
		return out
	}
	waitFor := func(what string, want []string) {
		t.Helper()
		for !slices.Equal(addresses(), want) {
			select {
			case <-ctx.Done():
				t.Fatalf("%s: the tracker files %v, want %v", what, addresses(), want)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	waitFor("added", []string{"10.244.1.5"})
	if obj, ok, _ := tracker.SliceKeys().GetByKey("default/web-abcde"); !ok {
		t.Fatal("the slice is not in the cache")
	} else if _, compact := obj.(*ipvsproxy.EndpointSlice); !compact {
		t.Fatalf("the cache holds a %T", obj)
	}
	updated := slice.DeepCopy()
	updated.ResourceVersion = "2"
	updated.Endpoints[0].Addresses = []string{"10.244.1.6"}
	if _, err := fakeClient.DiscoveryV1().EndpointSlices("default").Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("updated", []string{"10.244.1.6"})
	if err := fakeClient.DiscoveryV1().EndpointSlices("default").Delete(ctx, "web-abcde", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("deleted", nil)
	if keys := tracker.SliceKeys().ListKeys(); len(keys) != 0 {
		t.Errorf("the cache still holds %v", keys)
	}
}

// BenchmarkCachedServiceMemory reports the heap a cached Service holds
// after trimCached, decoded from protobuf as the informer decodes it: a
// ClusterIP Service of one port as the API server writes it (defaults
// applied, a selector, labels, managedFields of two managers).
func BenchmarkCachedServiceMemory(b *testing.B) {
	b.Run("cache", func(b *testing.B) { benchmarkServiceMemory(b, false) })
	// The same Services filed by the tracker too, which shares them with
	// the cache: what the daemon holds per Service for both.
	b.Run("cache+tracker", func(b *testing.B) { benchmarkServiceMemory(b, true) })
}

func benchmarkServiceMemory(b *testing.B, track bool) {
	const services = 5000
	encoded := make([][]byte, services)
	for i := range encoded {
		name := fmt.Sprintf("svc-%d", i)
		s := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("bench-%d", i%50), Name: name, UID: types.UID(fmt.Sprintf("0b5e3c1a-0000-4000-8000-%012d", i)),
				ResourceVersion: fmt.Sprint(100000 + i), CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC)),
				Labels: map[string]string{"app": name, "app.kubernetes.io/managed-by": "Helm"},
				ManagedFields: []metav1.ManagedFieldsEntry{
					{Manager: "helm", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1",
						FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:ports":{".":{},"k:{\"port\":80,\"protocol\":\"TCP\"}":{}},"f:selector":{}}}`)}},
					{Manager: "kube-apiserver", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1",
						FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:clusterIP":{}}}`)}},
				}},
			Spec: v1.ServiceSpec{
				Type:                  v1.ServiceTypeClusterIP,
				ClusterIP:             fmt.Sprintf("10.96.%d.%d", i/250, i%250),
				ClusterIPs:            []string{fmt.Sprintf("10.96.%d.%d", i/250, i%250)},
				IPFamilies:            []v1.IPFamily{v1.IPv4Protocol},
				IPFamilyPolicy:        ptr.To(v1.IPFamilyPolicySingleStack),
				InternalTrafficPolicy: ptr.To(v1.ServiceInternalTrafficPolicyCluster),
				SessionAffinity:       v1.ServiceAffinityNone,
				Selector:              map[string]string{"app": name},
				Ports:                 []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
			},
		}
		data, err := s.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		encoded[i] = data
	}
	held := heapHeldByCache(b, encoded, track, true, func(data []byte) (any, error) {
		s := &v1.Service{}
		return s, s.Unmarshal(data)
	}, func(t *ipvsproxy.ChangeTracker) cache.ResourceEventHandler { return t.ServiceHandler() })
	b.ReportMetric(held/services, "held-B/service")
}

// Through a real informer on a fake API server, the tracker follows a
// Service the cache holds compact: added, updated (the store reads its
// resource version and key through meta.Accessor) and deleted.
func TestTrackerFollowsCompactServicesThroughTheInformer(t *testing.T) {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", ResourceVersion: "1"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.20", ClusterIPs: []string{"10.96.0.20"}, Ports: []v1.ServicePort{{Port: 80, Protocol: v1.ProtocolTCP}}}}
	clientset := fake.NewClientset(svc)
	client := kubeapitest.FromClientset(clientset)
	tracker := ipvsproxy.NewChangeTracker("node1", nil)
	selectServices, _, _ := informerSelections("node1")
	informer := newTrackedInformer(client, client.Services(), &v1.Service{}, selectServices, tracker.ServiceKeys(), tracker.ServiceHandler())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	web := types.NamespacedName{Namespace: "default", Name: "web"}
	clusterIPs := func() []string {
		got, _ := tracker.Input(web)
		if got == nil {
			return nil
		}
		return got.Spec.ClusterIPs
	}
	waitFor := func(what string, want []string) {
		t.Helper()
		for !slices.Equal(clusterIPs(), want) {
			select {
			case <-ctx.Done():
				t.Fatalf("%s: the tracker holds cluster IPs %v, want %v", what, clusterIPs(), want)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	waitFor("added", []string{"10.96.0.20"})
	if obj, ok, _ := tracker.ServiceKeys().GetByKey("default/web"); !ok {
		t.Fatal("the Service is not in the cache")
	} else if compact, ok := obj.(*ipvsproxy.Service); !ok {
		t.Fatalf("the cache holds a %T", obj)
	} else if filed := tracker.Service(web); filed != compact {
		t.Errorf("the tracker files %p, not the cache's %p", filed, compact)
	}
	updated := svc.DeepCopy()
	updated.ResourceVersion = "2"
	updated.Spec.ClusterIPs = []string{"10.96.0.20", "2001:db8:96::20"}
	if _, err := clientset.CoreV1().Services("default").Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("updated", []string{"10.96.0.20", "2001:db8:96::20"})
	if err := clientset.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("deleted", nil)
	if keys := tracker.ServiceKeys().ListKeys(); len(keys) != 0 {
		t.Errorf("the cache still holds %v", keys)
	}
}

// Cached Services share their namespace, port names and constant-valued
// strings (type, policy, protocol) instead of each holding its decoded
// copy.
func TestCachedServicesShareNamespacesAndConstants(t *testing.T) {
	decoded := func(name string) *ipvsproxy.Service {
		s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shared-ns", Name: name},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyCluster,
				ClusterIPs: []string{"10.96.0.10"}, Ports: []v1.ServicePort{{Name: "metrics", Protocol: v1.ProtocolUDP, Port: 9100}}}}
		data, err := s.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		fresh := &v1.Service{}
		if err := fresh.Unmarshal(data); err != nil {
			t.Fatal(err)
		}
		got, _ := trimCached(fresh)
		return got.(*ipvsproxy.Service)
	}
	a, b := decoded("a"), decoded("b")
	for what, pair := range map[string][2]string{
		"namespace":             {a.Namespace, b.Namespace},
		"type":                  {string(a.Type()), string(b.Type())},
		"externalTrafficPolicy": {string(a.ExternalTrafficPolicy()), string(b.ExternalTrafficPolicy())},
		"port name":             {a.Ports[0].Name, b.Ports[0].Name},
		"protocol":              {string(a.Ports[0].Protocol), string(b.Ports[0].Protocol)},
	} {
		if pair[0] != pair[1] || unsafe.StringData(pair[0]) != unsafe.StringData(pair[1]) {
			t.Errorf("%s not shared: %q at %p, %q at %p", what, pair[0], unsafe.StringData(pair[0]), pair[1], unsafe.StringData(pair[1]))
		}
	}
}

// heapHeldByCache is the heap the daemon's informer cache (and with track,
// the tracker too) holds for the encoded objects: each decoded, passed
// through trimCached and, with track, filed by the tracker's handler, its
// pending changes taken with drain (as the Service figures were measured;
// the slice figures keep them).
func heapHeldByCache(b *testing.B, encoded [][]byte, track, drain bool, decode func([]byte) (any, error), handler func(*ipvsproxy.ChangeTracker) cache.ResourceEventHandler) float64 {
	var held float64
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		cached := make([]any, len(encoded))
		var tracker *ipvsproxy.ChangeTracker
		if track {
			tracker = ipvsproxy.NewChangeTracker("node1", func() {})
		}
		for i, data := range encoded {
			obj, err := decode(data)
			if err != nil {
				b.Fatal(err)
			}
			cached[i], _ = trimCached(obj)
			if track {
				handler(tracker).OnAdd(cached[i], true)
			}
		}
		if track && drain {
			tracker.Drain()
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		held = float64(after.HeapAlloc) - float64(before.HeapAlloc)
		runtime.KeepAlive(cached)
		runtime.KeepAlive(tracker)
	}
	return held
}

// With --node-addresses-from=endpointslices the daemon watches its own Node
// alone, as kube-proxy does, and the guard learns the other Nodes'
// addresses from the published slices it receives with every other slice;
// with the default every Node is listed and watched.
func TestNodeAddressesFromPublishedSlicesWatchNoOtherNode(t *testing.T) {
	for _, c := range []struct {
		source         nodeAddressSource
		wantAllNodes   bool
		wantOtherNodes map[netip.Addr]string
	}{
		{nodeAddressSource{}, true, map[netip.Addr]string{netip.MustParseAddr("198.51.100.2"): "node2"}},
		{nodeAddressSource{fromSlices: true, namespace: "ipvsproxy-node-addresses"}, false, map[netip.Addr]string{netip.MustParseAddr("198.51.100.22"): "node2"}},
	} {
		client := fakeCluster()
		client.Tracker().Add(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node2"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "198.51.100.2"}}}})
		for _, s := range nodeaddresses.Slices("ipvsproxy-node-addresses", map[string][]netip.Addr{"node2": {netip.MustParseAddr("198.51.100.22")}}) {
			client.Tracker().Add(s)
		}
		d := newDaemonUnderTest(t)
		ctx, cancel := context.WithCancel(context.Background())
		synced := d.startWith(t, ctx, client, c.source)
		if !cache.WaitForCacheSync(ctx.Done(), synced...) {
			t.Fatal("informers did not sync")
		}
		allNodes := false
		for _, a := range client.Actions() {
			if a.GetResource().Resource != "nodes" || (a.GetVerb() != "list" && a.GetVerb() != "watch") {
				continue
			}
			var sel string
			switch r := a.(type) {
			case k8stesting.ListAction:
				sel = r.GetListRestrictions().Fields.String()
			case k8stesting.WatchAction:
				sel = r.GetWatchRestrictions().Fields.String()
			}
			if sel != "metadata.name=node1" {
				allNodes = true
			}
		}
		if allNodes != c.wantAllNodes {
			t.Errorf("%+v: Nodes other than its own listed or watched: %v, want %v", c.source, allNodes, c.wantAllNodes)
		}
		deadline := time.Now().Add(5 * time.Second)
		for got := d.proxier.ClusterNodes().Others("node1"); !maps.Equal(got, c.wantOtherNodes); got = d.proxier.ClusterNodes().Others("node1") {
			if time.Now().After(deadline) {
				t.Errorf("%+v: other Nodes %v, want %v", c.source, got, c.wantOtherNodes)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}
}
