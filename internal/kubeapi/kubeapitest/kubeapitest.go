// Package kubeapitest puts client-go's fake clientset behind kubeapi.Client,
// so tests keep its object tracker and reactors. Only tests import it: the
// clientset is what kubeapi keeps out of the daemon's binary.
package kubeapitest

import (
	"context"

	"github.com/ipvsproxy/ipvsproxy/internal/kubeapi"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networking "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
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

func (s clientset) Events() record.EventSink {
	return &typedcorev1.EventSinkImpl{Interface: s.c.CoreV1().Events(metav1.NamespaceAll)}
}

func (s clientset) ServerResources(_ context.Context, groupVersion string) (*metav1.APIResourceList, error) {
	return s.c.Discovery().ServerResourcesForGroupVersion(groupVersion)
}

// IsWatchListSemanticsUnSupported passes on what the fake says of itself:
// its watches do not send the initial events a watch-list asks for, so
// informers on it must list.
func (s clientset) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(s.c)
}
