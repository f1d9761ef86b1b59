package cluster

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	memory "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// ProbeName is the object name a probe gets, creates, patches or deletes;
// a probe that is allowed to create leaves such an object behind, which
// only matters if the RBAC under test is already wrong.
const ProbeName = "e2e-access-probe"

// Access is what the API server answered a probe.
type Access int

const (
	Allowed Access = iota
	Forbidden
)

func (a Access) String() string {
	if a == Forbidden {
		return "forbidden"
	}
	return "allowed"
}

// Probe makes one real request (verb on resource, in namespace if the
// resource is namespaced) with cfg's credentials and reports whether
// authorization let it through. Asking the authorizer (SelfSubjectAccessReview)
// would test RBAC's arithmetic; a real request also tests what the client
// and the server do with it, watch included. Any answer but 403 means
// authorization passed: a 404 for `get` of a missing object is "allowed".
func Probe(ctx context.Context, cfg *rest.Config, verb, resource, namespace string) (Access, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return 0, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	gvr, err := mapper.ResourceFor(schema.GroupVersionResource{Resource: resource})
	if err != nil {
		return 0, fmt.Errorf("probe %s %s: %w", verb, resource, err)
	}
	gvk, err := mapper.KindFor(gvr)
	if err != nil {
		return 0, fmt.Errorf("probe %s %s: %w", verb, resource, err)
	}
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return 0, fmt.Errorf("probe %s %s: %w", verb, resource, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	var ri dynamic.ResourceInterface = dyn.Resource(gvr)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = dyn.Resource(gvr).Namespace(namespace)
	}

	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	switch verb {
	case "list":
		_, err = ri.List(ctx, metav1.ListOptions{Limit: 1})
	case "watch":
		err = probeWatch(ctx, ri)
	case "get":
		_, err = ri.Get(ctx, ProbeName, metav1.GetOptions{})
	case "create":
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(gvk)
		obj.SetName(ProbeName)
		_, err = ri.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	case "patch":
		_, err = ri.Patch(ctx, ProbeName, types.MergePatchType, []byte(`{}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
	case "delete":
		err = ri.Delete(ctx, ProbeName, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	default:
		return 0, fmt.Errorf("probe %s %s: unknown verb (want list, watch, get, create, patch or delete)", verb, resource)
	}
	switch {
	case apierrors.IsForbidden(err):
		return Forbidden, nil
	case err == nil, apierrors.IsNotFound(err), apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsAlreadyExists(err):
		return Allowed, nil
	default:
		return 0, fmt.Errorf("probe %s %s: %w", verb, resource, err)
	}
}

// probeWatch opens a watch and reads until the first event or a short
// timeout: a forbidden watch fails when opened, an allowed one streams.
func probeWatch(ctx context.Context, ri dynamic.ResourceInterface) error {
	timeout := int64(2)
	w, err := ri.Watch(ctx, metav1.ListOptions{TimeoutSeconds: &timeout})
	if err != nil {
		return err
	}
	defer w.Stop()
	select {
	case ev, ok := <-w.ResultChan():
		if ok && ev.Type == "ERROR" {
			return apierrors.FromObject(ev.Object)
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
