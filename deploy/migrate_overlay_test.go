package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"sigs.k8s.io/yaml"
)

// migrationLabel is the node label both DaemonSets select on during a
// node-by-node migration (docs/migrate-from-kube-proxy.md).
const migrationLabel = "ipvsproxy.io/proxy"

// The migrate overlay runs ipvsproxy only on nodes labelled for it, and
// first, in an init container of the same image and privileges, the
// clean-up of kube-proxy's leftovers.
func TestMigrateOverlay(t *testing.T) {
	r := renderTyped(t, "overlays/migrate")
	spec := r.daemonSet.Spec.Template.Spec
	if spec.NodeSelector["kubernetes.io/os"] != "linux" {
		t.Errorf("nodeSelector %v, want the base's", spec.NodeSelector)
	}
	for value, want := range map[string]bool{"ipvsproxy": true, "": false, "kube-proxy": false, "rollback": false} {
		if got := runsOn(t, r.daemonSet, nodeLabelled(value)); got != want {
			t.Errorf("on a node labelled %s=%q: runs %v, want %v", migrationLabel, value, got, want)
		}
	}
	if len(spec.InitContainers) != 1 {
		t.Fatalf("init containers %v, want the clean-up", spec.InitContainers)
	}
	init, proxy := spec.InitContainers[0], proxyContainer(t, r.daemonSet)
	if want := []string{"/usr/local/bin/ipvsproxy", "cleanup", "--kube-proxy-leftovers"}; !slices.Equal(init.Command, want) {
		t.Errorf("init command %q, want %q", init.Command, want)
	}
	if init.Image != proxy.Image {
		t.Errorf("init image %s, proxy image %s: one image", init.Image, proxy.Image)
	}
	sc := init.SecurityContext
	if sc == nil || sc.Privileged == nil || *sc.Privileged || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Add, proxy.SecurityContext.Capabilities.Add) || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("init securityContext %+v, want the proxy's (unprivileged, NET_ADMIN and NET_RAW only)", sc)
	}
	// iptables needs the host's xtables lock, like the proxy, and cleanup
	// takes ipvsproxy's node lock.
	checkHostMountsOf(t, "overlays/migrate init", spec, &init, nodeLocks)

	// An image override reaches the init container too.
	dir := t.TempDir()
	abs, err := filepath.Abs("overlays/migrate")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, abs)
	if err != nil {
		t.Fatal(err)
	}
	k := "resources:\n  - " + rel + "\nimages:\n  - name: registry.invalid/ipvsproxy\n    newName: registry.example.com/ipvsproxy\n    newTag: v9\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	over := renderTyped(t, dir)
	if got := over.daemonSet.Spec.Template.Spec.InitContainers[0].Image; got != "registry.example.com/ipvsproxy:v9" {
		t.Errorf("init image after override %s", got)
	}
}

// nodeLabelled is a Linux node as a kubelet registers it, with the
// migration label's value (none when empty).
func nodeLabelled(value string) *corev1.Node {
	n := &corev1.Node{}
	n.Name = "node-" + value
	n.Labels = map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/hostname": n.Name}
	if value != "" {
		n.Labels[migrationLabel] = value
	}
	return n
}

// runsOn says whether ds places a pod on node by its node selector and
// required node affinity, with the function the DaemonSet controller
// and the scheduler call (component-helpers' nodeaffinity).
func runsOn(t *testing.T, ds *appsv1.DaemonSet, node *corev1.Node) bool {
	t.Helper()
	pod := &corev1.Pod{Spec: ds.Spec.Template.Spec}
	ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)
	if err != nil {
		t.Fatalf("%s's node affinity: %v", ds.Name, err)
	}
	return ok
}

// kube-proxy-patch.yaml, applied to kubeadm's kube-proxy DaemonSet as
// `kubectl patch --patch-file` does (a strategic merge), keeps kube-proxy on
// every node ipvsproxy's migrate overlay does not take: exactly one proxy
// selects a node without the label (one that joins mid-migration) or with
// either proxy's value, and neither one labelled for rollback.
func TestKubeProxyPatchSelectsTheOtherNodes(t *testing.T) {
	kubeProxy := appsv1.DaemonSet{}
	kubeProxy.Name, kubeProxy.Namespace = "kube-proxy", "kube-system"
	kubeProxy.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
	kubeProxy.Spec.Template.Spec.Containers = []corev1.Container{{Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:v1.37.2"}}
	original, err := json.Marshal(kubeProxy)
	if err != nil {
		t.Fatal(err)
	}
	patchYAML, err := os.ReadFile("overlays/migrate/kube-proxy-patch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	patch, err := yaml.YAMLToJSONStrict(patchYAML)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := strategicpatch.StrategicMergePatch(original, patch, appsv1.DaemonSet{})
	if err != nil {
		t.Fatal(err)
	}
	var got appsv1.DaemonSet
	if err := unmarshalStrict(merged, &got); err != nil {
		t.Fatal(err)
	}
	if sel := got.Spec.Template.Spec.NodeSelector; sel["kubernetes.io/os"] != "linux" || len(got.Spec.Template.Spec.Containers) != 1 {
		t.Errorf("patched kube-proxy: nodeSelector %v, containers %d", sel, len(got.Spec.Template.Spec.Containers))
	}
	ours := renderTyped(t, "overlays/migrate").daemonSet
	chart, err := RenderChart(chartDir, filepath.Join(chartDir, "ci/migrate-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var charted *appsv1.DaemonSet
	for _, o := range chart {
		if ds, ok := must(Decode(o)).(*appsv1.DaemonSet); ok {
			charted = ds
		}
	}
	for value, want := range map[string]string{
		"":           "kube-proxy", // a node that joined mid-migration
		"kube-proxy": "kube-proxy",
		"ipvsproxy":  "ipvsproxy",
		"rollback":   "",
		"other":      "kube-proxy",
	} {
		node := nodeLabelled(value)
		for _, ipvsproxy := range []*appsv1.DaemonSet{ours, charted} {
			var on []string
			if runsOn(t, &got, node) {
				on = append(on, "kube-proxy")
			}
			if runsOn(t, ipvsproxy, node) {
				on = append(on, "ipvsproxy")
			}
			if strings.Join(on, " ") != want {
				t.Errorf("a node labelled %s=%q is on %q, want %q", migrationLabel, value, on, want)
			}
		}
	}
	// A node without the OS label is nobody's: both keep the base's selector.
	bare := nodeLabelled("")
	delete(bare.Labels, "kubernetes.io/os")
	if runsOn(t, &got, bare) || runsOn(t, ours, bare) {
		t.Errorf("a node without kubernetes.io/os=linux is selected")
	}
}

func must(v any, err error) any {
	if err != nil {
		panic(err)
	}
	return v
}

// The rollback pod decodes strictly, runs `ipvsproxy cleanup` on the node it
// names with the proxy's image and privileges.
func TestRollbackPod(t *testing.T) {
	objs, err := ReadObjects("overlays/migrate/rollback-pod.yaml")
	if err != nil || len(objs) != 1 {
		t.Fatalf("%d objects: %v", len(objs), err)
	}
	typed, err := Decode(objs[0])
	if err != nil {
		t.Fatal(err)
	}
	pod, ok := typed.(*corev1.Pod)
	if !ok {
		t.Fatalf("%T, want a Pod", typed)
	}
	proxy := proxyContainer(t, renderTyped(t, "base").daemonSet)
	c := pod.Spec.Containers[0]
	if pod.Spec.NodeName != "NODE" || !pod.Spec.HostNetwork || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("pod spec %+v", pod.Spec)
	}
	if !slices.Equal(c.Command, []string{"/usr/local/bin/ipvsproxy", "cleanup"}) || c.Image != proxy.Image {
		t.Errorf("command %q image %s", c.Command, c.Image)
	}
	if !slices.Equal(c.SecurityContext.Capabilities.Add, proxy.SecurityContext.Capabilities.Add) {
		t.Errorf("capabilities %v", c.SecurityContext.Capabilities.Add)
	}
	checkHostMountsOf(t, "rollback pod", pod.Spec, &c, nodeLocks)
}
