package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// The commands of a node-by-node migration (docs/migrate-from-kube-proxy.md),
// standing in for kubectl in the VM: label a node, create and patch the
// DaemonSets, and, since no DaemonSet controller runs, tell which DaemonSets
// would run a pod on a node.

// runLabelNode is `kubectl label node NODE KEY=VALUE --overwrite`.
func runLabelNode(ctx context.Context, args []string) error {
	if len(args) != 2 || !strings.Contains(args[1], "=") {
		return fmt.Errorf("usage: e2ectl %s", commands["label-node"].usage)
	}
	key, value, _ := strings.Cut(args[1], "=")
	cs, _, err := client()
	if err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, args[0], types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("label node %s %s: %w", args[0], args[1], err)
	}
	return nil
}

// runCreateDaemonSet creates (or replaces) the DaemonSet in FILE.
func runCreateDaemonSet(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: e2ectl %s", commands["create-daemonset"].usage)
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(data, &ds); err != nil {
		return fmt.Errorf("decode %s: %w", args[0], err)
	}
	cs, _, err := client()
	if err != nil {
		return err
	}
	dss := cs.AppsV1().DaemonSets(ds.Namespace)
	if old, err := dss.Get(ctx, ds.Name, metav1.GetOptions{}); err == nil {
		ds.ResourceVersion = old.ResourceVersion
		_, err = dss.Update(ctx, &ds, metav1.UpdateOptions{})
		return err
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	_, err = dss.Create(ctx, &ds, metav1.CreateOptions{})
	return err
}

// runPatchDaemonSet is `kubectl -n NS patch daemonset NAME --patch-file FILE`
// (a strategic merge patch, YAML or JSON).
func runPatchDaemonSet(ctx context.Context, args []string) error {
	if len(args) != 2 || !strings.Contains(args[0], "/") {
		return fmt.Errorf("usage: e2ectl %s", commands["patch-daemonset"].usage)
	}
	ns, name, _ := strings.Cut(args[0], "/")
	data, err := os.ReadFile(args[1])
	if err != nil {
		return err
	}
	patch, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return fmt.Errorf("decode %s: %w", args[1], err)
	}
	cs, _, err := client()
	if err != nil {
		return err
	}
	if _, err := cs.AppsV1().DaemonSets(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch daemonset %s with %s: %w", args[0], args[1], err)
	}
	return nil
}

// runDaemonSetsFor prints the DaemonSets of kube-system whose pod template's
// nodeSelector matches NODE's labels: where the DaemonSet controller would
// run a pod (tolerations aside; both proxies tolerate everything).
func runDaemonSetsFor(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: e2ectl %s", commands["daemonsets-for"].usage)
	}
	cs, _, err := client()
	if err != nil {
		return err
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, args[0], metav1.GetOptions{})
	if err != nil {
		return err
	}
	list, err := cs.AppsV1().DaemonSets("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var names []string
	for _, ds := range list.Items {
		if labels.SelectorFromSet(ds.Spec.Template.Spec.NodeSelector).Matches(labels.Set(node.Labels)) {
			names = append(names, ds.Name)
		}
	}
	sort.Strings(names)
	fmt.Println(strings.Join(names, " "))
	return nil
}
