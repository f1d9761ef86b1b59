package cluster

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

// The steps of a node-by-node migration (docs/migrate-from-kube-proxy.md)
// that kubectl would take: create and patch the two proxies' DaemonSets and,
// since no DaemonSet controller runs here, tell which DaemonSets would run a
// pod on a node.

// DecodeDaemonSet reads one DaemonSet manifest (YAML or JSON); a field the
// type does not have is an error, as kubectl's strict validation makes it.
func DecodeDaemonSet(data []byte) (*appsv1.DaemonSet, error) {
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(data, &ds); err != nil {
		return nil, fmt.Errorf("decode DaemonSet: %w", err)
	}
	return &ds, nil
}

// ApplyDaemonSet creates ds, or replaces the one of its name; it returns
// the one it replaced (nil: created).
func ApplyDaemonSet(ctx context.Context, cs kubernetes.Interface, ds *appsv1.DaemonSet) (*appsv1.DaemonSet, error) {
	dss := cs.AppsV1().DaemonSets(ds.Namespace)
	old, err := dss.Get(ctx, ds.Name, metav1.GetOptions{})
	switch {
	case err == nil:
		ds = ds.DeepCopy()
		ds.ResourceVersion = old.ResourceVersion
		if _, err := dss.Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("replace DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
		}
		return old, nil
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("get DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	if _, err := dss.Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	return nil, nil
}

// PatchDaemonSet is `kubectl -n NS patch daemonset NAME --patch-file FILE`:
// patch (YAML or JSON) as a strategic merge patch. It returns the DaemonSet
// as it was before.
func PatchDaemonSet(ctx context.Context, cs kubernetes.Interface, namespace, name string, patch []byte) (*appsv1.DaemonSet, error) {
	body, err := yaml.YAMLToJSONStrict(patch)
	if err != nil {
		return nil, fmt.Errorf("decode the patch of DaemonSet %s/%s: %w", namespace, name, err)
	}
	dss := cs.AppsV1().DaemonSets(namespace)
	old, err := dss.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get DaemonSet %s/%s: %w", namespace, name, err)
	}
	if _, err := dss.Patch(ctx, name, types.StrategicMergePatchType, body, metav1.PatchOptions{}); err != nil {
		return nil, fmt.Errorf("patch DaemonSet %s/%s: %w", namespace, name, err)
	}
	return old, nil
}

// DaemonSetsFor names the DaemonSets of namespace that would run a pod on
// the node, sorted: whose pod template's node selector and required node
// affinity match the node, and whose tolerations cover its NoSchedule and
// NoExecute taints. These are the checks of the DaemonSet controller
// (pkg/controller/daemon, predicates), made with the same functions of
// k8s.io/component-helpers.
func DaemonSetsFor(ctx context.Context, cs kubernetes.Interface, namespace, node string) ([]string, error) {
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get Node %s: %w", node, err)
	}
	list, err := cs.AppsV1().DaemonSets(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list DaemonSets of %s: %w", namespace, err)
	}
	var names []string
	for _, ds := range list.Items {
		runs, err := RunsOn(&ds, n)
		if err != nil {
			return nil, err
		}
		if runs {
			names = append(names, ds.Name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// RunsOn says whether the DaemonSet controller would place a pod of ds on node.
func RunsOn(ds *appsv1.DaemonSet, node *corev1.Node) (bool, error) {
	pod := &corev1.Pod{Spec: ds.Spec.Template.Spec}
	fits, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)
	if err != nil {
		return false, fmt.Errorf("DaemonSet %s/%s: node affinity: %w", ds.Namespace, ds.Name, err)
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoExecute || t.Effect == corev1.TaintEffectNoSchedule
	}, false)
	return fits && !untolerated, nil
}
