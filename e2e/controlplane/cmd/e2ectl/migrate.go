package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/e2e/controlplane/cluster"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The commands of a node-by-node migration (docs/migrate-from-kube-proxy.md),
// standing in for kubectl in the VM: label a node, create and patch the
// DaemonSets, and, since no DaemonSet controller runs, tell which DaemonSets
// would run a pod on a node. e2e/suite's migrate-node-by-node calls the cluster
// package's functions these wrap.

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
	ds, err := cluster.DecodeDaemonSet(data)
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	cs, _, err := client()
	if err != nil {
		return err
	}
	_, err = cluster.ApplyDaemonSet(ctx, cs, ds)
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
	cs, _, err := client()
	if err != nil {
		return err
	}
	if _, err := cluster.PatchDaemonSet(ctx, cs, ns, name, data); err != nil {
		return fmt.Errorf("%w (%s)", err, args[1])
	}
	return nil
}

// runDaemonSetsFor prints the DaemonSets of kube-system that would run a pod
// on NODE (cluster.DaemonSetsFor: node selector, node affinity, taints).
func runDaemonSetsFor(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: e2ectl %s", commands["daemonsets-for"].usage)
	}
	cs, _, err := client()
	if err != nil {
		return err
	}
	names, err := cluster.DaemonSetsFor(ctx, cs, "kube-system", args[0])
	if err != nil {
		return err
	}
	fmt.Println(strings.Join(names, " "))
	return nil
}
