package main

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

// newInformerFactory is every informer factory of the daemon: the caches
// keep what trimCached leaves of each object.
func newInformerFactory(client kubernetes.Interface, tweak func(*metav1.ListOptions)) informers.SharedInformerFactory {
	opts := []informers.SharedInformerOption{informers.WithTransform(trimCached)}
	if tweak != nil {
		opts = append(opts, informers.WithTweakListOptions(tweak))
	}
	return informers.NewSharedInformerFactoryWithOptions(client, 0, opts...)
}

// trimCached drops from a cached object what the proxier never reads:
// managedFields, often the largest part of an object written by server-side
// apply, and kubectl's last-applied-configuration annotation, a second copy
// of the whole object. Every node caches every Service and EndpointSlice of
// the cluster, so this is memory per node at scale (issue 9). The informer
// hands over a freshly decoded object, so changing it in place is safe; a
// tombstone is left as it is.
func trimCached(obj any) (any, error) {
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

// newClusterNodeInformerFactory watches every Node for the node guard, which
// reads only names and addresses: the cache keeps those alone (a Node's
// status carries images, conditions and volumes, kilobytes each).
func newClusterNodeInformerFactory(client kubernetes.Interface) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(keepNodeAddresses))
}

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
