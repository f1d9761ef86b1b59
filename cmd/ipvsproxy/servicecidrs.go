package main

import (
	"fmt"

	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// watchServiceCIDRs starts an informer on networking.k8s.io/v1 ServiceCIDR
// objects feeding the tracker, and returns what says it has synced. An API
// server that does not serve them (before Kubernetes 1.33, or with the
// MultiCIDRServiceAllocator gate off) gets no informer: its list would fail
// forever and the start-up would wait for it; --service-cidrs names the
// ranges there.
func watchServiceCIDRs(client kubernetes.Interface, tracker *ipvsproxy.ChangeTracker, stop <-chan struct{}) (cache.InformerSynced, error) {
	resources, err := client.Discovery().ServerResourcesForGroupVersion("networking.k8s.io/v1")
	if err != nil {
		klog.InfoS("Not watching ServiceCIDRs; the API server does not list networking.k8s.io/v1", "err", err)
		return func() bool { return true }, nil
	}
	served := false
	for _, r := range resources.APIResources {
		served = served || r.Name == "servicecidrs"
	}
	if !served {
		klog.InfoS("Not watching ServiceCIDRs; the API server does not serve them")
		return func() bool { return true }, nil
	}
	factory := newInformerFactory(client, nil)
	reg, err := factory.Networking().V1().ServiceCIDRs().Informer().AddEventHandler(tracker.ServiceCIDRHandler())
	if err != nil {
		return nil, fmt.Errorf("watch ServiceCIDRs: %w", err)
	}
	factory.Start(stop)
	return reg.HasSynced, nil
}
