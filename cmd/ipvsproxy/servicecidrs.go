package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/kubeapi"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	networking "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

var serviceCIDRResource = schema.GroupResource{Group: "networking.k8s.io", Resource: "servicecidrs"}

// serviceCIDRDiscovery is how discovery of ServiceCIDRs is retried while the
// API server answers with errors (restarting, overloaded): until it answers,
// every 30 s at most. A var so tests need not wait.
var serviceCIDRDiscovery = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 6, Cap: 30 * time.Second}

// serviceCIDRGrace bounds how long the first sync waits for discovery that
// keeps failing: past it the node proxies as if ServiceCIDRs were not served
// (--service-cidrs, each cluster IP bound), and takes them up when discovery
// answers.
var serviceCIDRGrace = 30 * time.Second

const withoutServiceCIDRs = "proxying without ServiceCIDRs: --service-cidrs names the Service ranges and each cluster IP is bound on kube-ipvs0"

// watchServiceCIDRs feeds the tracker from an informer on networking.k8s.io/v1
// ServiceCIDR objects, and returns what says the first sync may go. The
// informer is optional, so none of its failures holds proxying:
//   - discovery failing (an API server restarting) is retried with backoff
//     until it answers; the first sync waits for it serviceCIDRGrace at most;
//   - an API server that does not serve ServiceCIDRs (before Kubernetes 1.33,
//     or with the MultiCIDRServiceAllocator gate off) gets no informer: its
//     list would fail forever;
//   - a list the ClusterRole forbids (one older than the daemon) counts as
//     not served, reported by access, and the informer keeps retrying so a
//     granted rule is taken up without a restart.
func watchServiceCIDRs(ctx context.Context, client kubeapi.Client, tracker *ipvsproxy.ChangeTracker, access *apiAccess) cache.InformerSynced {
	var settled atomic.Bool
	var informerSynced atomic.Pointer[cache.InformerSynced]
	start := time.Now()
	go func() {
		served, err := discoverServiceCIDRs(ctx, client)
		if err != nil || !served {
			settled.Store(true)
			return
		}
		informer := newInformer(client, client.ServiceCIDRs(), &networking.ServiceCIDR{}, nil, nil)
		reg, err := informer.AddEventHandler(tracker.ServiceCIDRHandler())
		if err == nil {
			err = informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
				if apierrors.IsForbidden(err) {
					access.reportForbidden(serviceCIDRResource, err, withoutServiceCIDRs)
					settled.Store(true)
					return
				}
				cache.DefaultWatchErrorHandler(ctx, r, err)
			})
		}
		if err != nil {
			// Only a started informer refuses these; this one is new.
			klog.ErrorS(err, "Not watching ServiceCIDRs; "+withoutServiceCIDRs)
			settled.Store(true)
			return
		}
		synced := cache.InformerSynced(reg.HasSynced)
		informerSynced.Store(&synced)
		go informer.RunWithContext(ctx)
		if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
			access.reportPermitted(serviceCIDRResource)
		}
	}()
	return func() bool {
		if settled.Load() {
			return true
		}
		if synced := informerSynced.Load(); synced != nil && (*synced)() {
			return true
		}
		if time.Since(start) >= serviceCIDRGrace {
			if !settled.Swap(true) {
				klog.InfoS("ServiceCIDR discovery still fails; "+withoutServiceCIDRs+" until it answers", "waited", serviceCIDRGrace)
			}
			return true
		}
		return false
	}
}

// discoverServiceCIDRs asks the API server whether it serves
// networking.k8s.io/v1 servicecidrs, retrying with serviceCIDRDiscovery
// while it answers with anything but a verdict. The error is only ctx's.
func discoverServiceCIDRs(ctx context.Context, client kubeapi.Client) (served bool, err error) {
	attempt := 0
	err = serviceCIDRDiscovery.DelayFunc().Until(ctx, true, false, func(context.Context) (bool, error) {
		attempt++
		resources, err := client.ServerResources(ctx, "networking.k8s.io/v1")
		switch {
		case apierrors.IsNotFound(err):
			klog.InfoS("Not watching ServiceCIDRs; the API server does not serve networking.k8s.io/v1")
			return true, nil
		case apierrors.IsForbidden(err):
			// Discovery is open to every authenticated client by default;
			// a cluster that closed it is answered as one without them.
			klog.InfoS("Not watching ServiceCIDRs; discovery of networking.k8s.io/v1 is forbidden", "err", err)
			return true, nil
		case err != nil:
			klog.InfoS("ServiceCIDR discovery failed; retrying", "attempt", attempt, "err", err)
			return false, nil
		}
		for _, r := range resources.APIResources {
			served = served || r.Name == serviceCIDRResource.Resource
		}
		if !served {
			klog.InfoS("Not watching ServiceCIDRs; the API server does not serve them")
		} else if attempt > 1 {
			klog.InfoS("ServiceCIDR discovery answered", "attempts", attempt)
		}
		return true, nil
	})
	return served, err
}
