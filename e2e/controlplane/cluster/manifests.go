package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	memory "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// RBACKinds are the kinds that make up the proxier's identity in deploy/.
var RBACKinds = []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}

// ReadManifests reads every object of the YAML files directly in dir
// (kustomization.yaml excepted), in file-name order. A namespaced object
// without a namespace gets the kustomization's `namespace:` if there is one,
// else defaultNamespace, as `kubectl apply -k` would give it.
func ReadManifests(dir, defaultNamespace string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.y*ml"))
	if err != nil {
		return nil, fmt.Errorf("read manifests in %s: %w", dir, err)
	}
	sort.Strings(files)
	namespace := defaultNamespace
	var objs []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read manifests: %w", err)
		}
		if base := filepath.Base(f); base == "kustomization.yaml" || base == "kustomization.yml" {
			var k struct {
				Namespace string `json:"namespace"`
			}
			if err := yaml.Unmarshal(data, &k); err != nil {
				return nil, fmt.Errorf("read manifests: parse %s: %w", f, err)
			}
			if k.Namespace != "" {
				namespace = k.Namespace
			}
			continue
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := &unstructured.Unstructured{}
			err := dec.Decode(&obj.Object)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("read manifests: parse %s: %w", f, err)
			}
			if len(obj.Object) == 0 {
				continue // an empty document between two ---
			}
			if obj.GetKind() == "" || obj.GetName() == "" {
				return nil, fmt.Errorf("read manifests: %s holds an object without kind or name", f)
			}
			objs = append(objs, obj)
		}
	}
	for _, o := range objs {
		if o.GetNamespace() == "" && !clusterScoped(o.GetKind()) {
			o.SetNamespace(namespace)
		}
	}
	return objs, nil
}

// clusterScoped covers the kinds deploy/ may hold; the API server's own
// scope decides on apply, this only picks a namespace to fill in.
func clusterScoped(kind string) bool {
	switch kind {
	case "Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass", "CustomResourceDefinition":
		return true
	}
	return false
}

// FilterKinds keeps the objects whose kind is one of kinds.
func FilterKinds(objs []*unstructured.Unstructured, kinds []string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		for _, k := range kinds {
			if o.GetKind() == k {
				out = append(out, o)
				break
			}
		}
	}
	return out
}

// Apply writes each object with server-side apply, so a field the API
// server's schema does not know fails here instead of being dropped.
func Apply(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("apply manifests: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("apply manifests: %w", err)
	}
	force := true
	for _, o := range objs {
		what := describe(o)
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("apply %s: %w", what, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		body, err := o.MarshalJSON()
		if err != nil {
			return fmt.Errorf("apply %s: %w", what, err)
		}
		if _, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: FieldManager, Force: &force}); err != nil {
			return fmt.Errorf("apply %s: %w", what, err)
		}
	}
	return nil
}

func describe(o *unstructured.Unstructured) string {
	parts := []string{o.GetKind()}
	if o.GetNamespace() != "" {
		parts = append(parts, o.GetNamespace()+"/"+o.GetName())
	} else {
		parts = append(parts, o.GetName())
	}
	return strings.Join(parts, " ")
}
