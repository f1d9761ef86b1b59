// Package kubeapitest puts client-go's fake clientset behind kubeapi.Client,
// so tests keep its object tracker and reactors. Only tests import it: the
// clientset is what kubeapi keeps out of the daemon's binary.
package kubeapitest

import (
	"context"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/kubeapi"
	"github.com/ipvsproxy/ipvsproxy/internal/events"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networking "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/watchlist"
)

// FromClientset is c behind kubeapi.Client.
func FromClientset(c kubernetes.Interface) kubeapi.Client { return clientset{c} }

type clientset struct{ c kubernetes.Interface }

func (s clientset) Services() kubeapi.ListWatcher[*v1.ServiceList] {
	return s.c.CoreV1().Services(metav1.NamespaceAll)
}

func (s clientset) EndpointSlices() kubeapi.ListWatcher[*discovery.EndpointSliceList] {
	return s.c.DiscoveryV1().EndpointSlices(metav1.NamespaceAll)
}

func (s clientset) Nodes() kubeapi.Nodes { return s.c.CoreV1().Nodes() }

func (s clientset) ServiceCIDRs() kubeapi.ListWatcher[*networking.ServiceCIDRList] {
	return s.c.NetworkingV1().ServiceCIDRs()
}

func (s clientset) Events() events.Sink { return eventSink{s.c} }

// eventSink writes Events through the fake's typed client, as the daemon's
// through its REST client.
type eventSink struct{ c kubernetes.Interface }

func (s eventSink) Create(e *v1.Event) (*v1.Event, error) {
	return s.c.CoreV1().Events(e.Namespace).Create(context.Background(), e, metav1.CreateOptions{})
}

func (s eventSink) Patch(e *v1.Event, mergePatch []byte) (*v1.Event, error) {
	return s.c.CoreV1().Events(e.Namespace).Patch(context.Background(), e.Name, types.MergePatchType, mergePatch, metav1.PatchOptions{})
}

func (s clientset) ServerResources(_ context.Context, groupVersion string) (*metav1.APIResourceList, error) {
	return s.c.Discovery().ServerResourcesForGroupVersion(groupVersion)
}

// APIVersions is what the fake clientset's discovery knows of /api: its
// versions, no server address.
func (s clientset) APIVersions(context.Context) (*metav1.APIVersions, error) {
	return &metav1.APIVersions{Versions: []string{"v1"}}, nil
}

// IsWatchListSemanticsUnSupported passes on what the fake says of itself:
// its watches do not send the initial events a watch-list asks for, so
// informers on it must list.
func (s clientset) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(s.c)
}
