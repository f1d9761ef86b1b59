package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
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
	if spec.NodeSelector[migrationLabel] != "ipvsproxy" || spec.NodeSelector["kubernetes.io/os"] != "linux" {
		t.Errorf("nodeSelector %v, want %s=ipvsproxy and the base's", spec.NodeSelector, migrationLabel)
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

// kube-proxy-patch.yaml, applied to kubeadm's kube-proxy DaemonSet as
// `kubectl patch --patch-file` does (a strategic merge), keeps kube-proxy on
// the nodes labelled for it: no node matches both DaemonSets.
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
	sel := got.Spec.Template.Spec.NodeSelector
	if sel[migrationLabel] != "kube-proxy" || sel["kubernetes.io/os"] != "linux" || len(got.Spec.Template.Spec.Containers) != 1 {
		t.Errorf("patched kube-proxy: nodeSelector %v, containers %d", sel, len(got.Spec.Template.Spec.Containers))
	}
	ours := renderTyped(t, "overlays/migrate").daemonSet.Spec.Template.Spec.NodeSelector
	if ours[migrationLabel] == sel[migrationLabel] {
		t.Errorf("both DaemonSets select %s=%s", migrationLabel, sel[migrationLabel])
	}
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
