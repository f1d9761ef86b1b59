package deploy

import (
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/nodelock"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	rbacDoc    = "../docs/rbac.md"
	migrateDoc = "../docs/migrate-from-kube-proxy.md"
	healthPort = 10256
)

// kustomizations are every directory a user may apply.
var kustomizations = []string{"base", "overlays/example", "overlays/modprobe", "overlays/kube-proxy-labels", "overlays/kubeadm", "overlays/migrate", "overlays/node-watch"}

// rendered holds the typed objects of one kustomization.
type rendered struct {
	serviceAccount *corev1.ServiceAccount
	role           *rbacv1.ClusterRole
	binding        *rbacv1.ClusterRoleBinding
	config         *corev1.ConfigMap
	daemonSet      *appsv1.DaemonSet
	// publisher are the objects of the Node address publisher
	// (base/node-addresses.yaml), by kind.
	publisher map[string]any
}

// renderTyped renders dir and decodes every object strictly; each of the
// daemon's five kinds must appear exactly once, and nothing else but the
// publisher's objects (named nodeAddressesPublisher) may.
func renderTyped(t *testing.T, dir string) rendered {
	t.Helper()
	objs, err := Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	var r rendered
	count := map[string]int{}
	for _, o := range objs {
		typed, err := Decode(o)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if o.GetName() == nodeAddressesPublisher {
			if r.publisher == nil {
				r.publisher = map[string]any{}
			}
			if r.publisher[o.GetKind()] != nil {
				t.Fatalf("%s: two publisher objects of kind %s", dir, o.GetKind())
			}
			r.publisher[o.GetKind()] = typed
			continue
		}
		count[o.GetKind()]++
		switch v := typed.(type) {
		case *corev1.ServiceAccount:
			r.serviceAccount = v
		case *rbacv1.ClusterRole:
			r.role = v
		case *rbacv1.ClusterRoleBinding:
			r.binding = v
		case *corev1.ConfigMap:
			r.config = v
		case *appsv1.DaemonSet:
			r.daemonSet = v
		default:
			t.Errorf("%s: unexpected %s %s", dir, o.GetKind(), o.GetName())
		}
	}
	for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet"} {
		if count[kind] != 1 {
			t.Fatalf("%s: %d objects of kind %s, want 1", dir, count[kind], kind)
		}
	}
	return r
}

func TestManifestsDecodeStrictly(t *testing.T) {
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) { renderTyped(t, dir) })
	}
}

// The strictness the test above relies on: a misspelt field, a duplicate key,
// a misspelt kustomization field and an image override that matches nothing
// all fail.
func TestRenderRejects(t *testing.T) {
	ds := func(extra string) string {
		return "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: x\n  namespace: kube-system\nspec:\n  template:\n    spec:\n" + extra
	}
	cases := []struct {
		name, kustomization, manifest string
		renderFails                   bool
	}{
		{"misspelt field", "resources: [m.yaml]\n", ds("      hostNetwrok: true\n"), false},
		{"field in the wrong case", "resources: [m.yaml]\n", ds("      hostnetwork: true\n"), false},
		{"duplicate key", "resources: [m.yaml]\n", ds("      hostNetwork: true\n      hostNetwork: false\n"), true},
		{"misspelt kustomization field", "resourcez: [m.yaml]\n", ds("      hostNetwork: true\n"), true},
		{"image override matching nothing", "resources: [m.yaml]\nimages:\n  - name: nothing/here\n    newTag: v1\n", ds("      hostNetwork: true\n"), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" + c.kustomization
			if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "m.yaml"), []byte(c.manifest), 0o644); err != nil {
				t.Fatal(err)
			}
			objs, err := Render(dir)
			if c.renderFails {
				if err == nil {
					t.Fatalf("Render succeeded, want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Decode(objs[0]); err == nil {
				t.Fatalf("Decode succeeded, want an unknown-field error")
			}
		})
	}
}

func TestClusterRoleMatchesRBACDoc(t *testing.T) {
	documented, err := DocumentedRBAC(rbacDoc)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range kustomizations {
		r := renderTyped(t, dir)
		granted, err := ExpandRules(r.role)
		if err != nil {
			t.Fatal(err)
		}
		if err := CompareRBAC(granted, documented); err != nil {
			t.Errorf("%s: %v", dir, err)
		}
	}
}

// The check above must catch a verb or a resource added without a reason,
// and a reason left behind for a rule removed.
func TestCompareRBACCatchesDrift(t *testing.T) {
	documented, err := DocumentedRBAC(rbacDoc)
	if err != nil {
		t.Fatal(err)
	}
	r := renderTyped(t, "base")
	granted, err := ExpandRules(r.role)
	if err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func([]RBACRule) []RBACRule{
		"added verb":     func(g []RBACRule) []RBACRule { return append(g, RBACRule{"", "services", "update"}) },
		"added resource": func(g []RBACRule) []RBACRule { return append(g, RBACRule{"", "secrets", "list"}) },
		"removed rule":   func(g []RBACRule) []RBACRule { return g[1:] },
	} {
		changed := mutate(append([]RBACRule(nil), granted...))
		if err := CompareRBAC(changed, documented); err == nil {
			t.Errorf("%s: CompareRBAC found no disagreement", name)
		}
	}
	wild := &rbacv1.ClusterRole{Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"*"}, Verbs: []string{"get"}}}}
	if _, err := ExpandRules(wild); err == nil {
		t.Errorf("ExpandRules accepted a wildcard resource")
	}
}

func TestBindingGrantsRoleToServiceAccount(t *testing.T) {
	r := renderTyped(t, "base")
	if r.binding.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.role.Name}) {
		t.Errorf("roleRef = %+v, want ClusterRole %s", r.binding.RoleRef, r.role.Name)
	}
	want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: r.serviceAccount.Name, Namespace: r.serviceAccount.Namespace}}
	if !reflect.DeepEqual(r.binding.Subjects, want) {
		t.Errorf("subjects = %+v, want %+v", r.binding.Subjects, want)
	}
	if got := r.daemonSet.Spec.Template.Spec.ServiceAccountName; got != r.serviceAccount.Name {
		t.Errorf("DaemonSet runs as ServiceAccount %q, want %q", got, r.serviceAccount.Name)
	}
	if r.serviceAccount.Namespace != r.daemonSet.Namespace {
		t.Errorf("ServiceAccount in %q, DaemonSet in %q", r.serviceAccount.Namespace, r.daemonSet.Namespace)
	}
}

// proxyContainer returns the container that runs `ipvsproxy run`.
func proxyContainer(t *testing.T, ds *appsv1.DaemonSet) *corev1.Container {
	t.Helper()
	for i, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == "ipvsproxy" {
			return &ds.Spec.Template.Spec.Containers[i]
		}
	}
	t.Fatalf("DaemonSet %s has no container ipvsproxy", ds.Name)
	return nil
}

// probePort resolves a probe's port, named or numbered, to a number.
func probePort(t *testing.T, c *corev1.Container, p intstr.IntOrString) int {
	t.Helper()
	if p.Type == intstr.Int {
		return p.IntValue()
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort)
		}
	}
	t.Fatalf("probe port %q names no container port", p.StrVal)
	return 0
}

func TestProbesUseHealthzPort(t *testing.T) {
	for _, dir := range kustomizations {
		r := renderTyped(t, dir)
		c := proxyContainer(t, r.daemonSet)
		for _, p := range []struct {
			name  string
			probe *corev1.Probe
			path  string
		}{{"liveness", c.LivenessProbe, "/livez"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
			if p.probe == nil || p.probe.HTTPGet == nil {
				t.Errorf("%s: %s probe is not an HTTP GET", dir, p.name)
				continue
			}
			if p.probe.HTTPGet.Path != p.path {
				t.Errorf("%s: %s probe path %q, want %q", dir, p.name, p.probe.HTTPGet.Path, p.path)
			}
			if port := probePort(t, c, p.probe.HTTPGet.Port); port != healthPort {
				t.Errorf("%s: %s probe port %d, want %d", dir, p.name, port, healthPort)
			}
		}
		// The daemon must listen where the probes knock.
		if addr, ok := r.config.Data[EnvVarForFlag("--healthz-bind-address")]; ok {
			_, port, err := net.SplitHostPort(addr)
			if err != nil || port != "10256" {
				t.Errorf("%s: healthz bind address %q does not listen on %d", dir, addr, healthPort)
			}
		}
	}
}

func TestEnvVarsAreDocumentedFlags(t *testing.T) {
	flags, err := DocumentedFlags(migrateDoc)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, env := range flags {
		documented[env] = true
	}
	for _, dir := range kustomizations {
		r := renderTyped(t, dir)
		for key, value := range r.config.Data {
			if !documented[key] {
				t.Errorf("%s: ConfigMap %s sets %s, which is no flag in the table of %s", dir, r.config.Name, key, migrateDoc)
			}
			// urfave/cli takes a set but empty variable as the value "",
			// replacing the flag's default.
			if strings.TrimSpace(value) == "" {
				t.Errorf("%s: ConfigMap %s sets %s to an empty value; leave it out instead", dir, r.config.Name, key)
			}
		}
		for _, e := range proxyContainer(t, r.daemonSet).Env {
			if strings.HasPrefix(e.Name, "IPVSPROXY_") && !documented[e.Name] {
				t.Errorf("%s: DaemonSet sets %s, which is no flag in the table of %s", dir, e.Name, migrateDoc)
			}
		}
	}
}

func TestDaemonSetRunsOnEveryNodeInHostNetwork(t *testing.T) {
	for _, dir := range kustomizations {
		r := renderTyped(t, dir)
		ds := r.daemonSet
		pod := ds.Spec.Template.Spec
		c := proxyContainer(t, ds)
		if !pod.HostNetwork {
			t.Errorf("%s: hostNetwork is false; IPVS state is per network namespace", dir)
		}
		// Cluster DNS needs a proxy: with it the API server's host name
		// could never resolve on a node without one.
		if pod.DNSPolicy != corev1.DNSDefault {
			t.Errorf("%s: dnsPolicy %q, want Default (the node's resolver)", dir, pod.DNSPolicy)
		}
		if pod.PriorityClassName != "system-node-critical" {
			t.Errorf("%s: priorityClassName %q", dir, pod.PriorityClassName)
		}
		if !reflect.DeepEqual(pod.Tolerations, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}) {
			t.Errorf("%s: tolerations %+v, want one that tolerates every taint", dir, pod.Tolerations)
		}
		u := ds.Spec.UpdateStrategy
		if u.Type != appsv1.RollingUpdateDaemonSetStrategyType || u.RollingUpdate == nil ||
			u.RollingUpdate.MaxUnavailable == nil || *u.RollingUpdate.MaxUnavailable != intstr.FromInt32(1) {
			t.Errorf("%s: updateStrategy %+v, want RollingUpdate one node at a time", dir, u)
		}
		if sel := ds.Spec.Selector.MatchLabels; len(sel) == 0 {
			t.Errorf("%s: empty selector", dir)
		} else {
			for k, v := range sel {
				if ds.Spec.Template.Labels[k] != v {
					t.Errorf("%s: template lacks selector label %s=%s", dir, k, v)
				}
			}
		}
		if dir == "overlays/kubeadm" { // the file decides; see TestKubeadmOverlay
		} else if len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || c.EnvFrom[0].ConfigMapRef.Name != r.config.Name {
			t.Errorf("%s: envFrom %+v, want the ConfigMap %s", dir, c.EnvFrom, r.config.Name)
		}
		var hostname *corev1.EnvVar
		for i := range c.Env {
			if c.Env[i].Name == EnvVarForFlag("--hostname-override") {
				hostname = &c.Env[i]
			}
		}
		if hostname == nil || hostname.ValueFrom == nil || hostname.ValueFrom.FieldRef == nil || hostname.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
			t.Errorf("%s: IPVSPROXY_HOSTNAME_OVERRIDE must come from the downward API's spec.nodeName, got %+v", dir, hostname)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("%s: resource requests %v, want cpu and memory", dir, c.Resources.Requests)
		}
		checkHostMounts(t, dir, pod, c)
	}
}

func checkHostMounts(t *testing.T, dir string, pod corev1.PodSpec, c *corev1.Container) {
	t.Helper()
	checkHostMountsOf(t, dir, pod, c, nodeLocks)
}

// nodeLocks are the host paths every container that writes the node's
// kernel state shares: iptables' lock, and the directory of ipvsproxy's own
// (--lock-file's default), which keeps a second ipvsproxy from undoing the
// first's writes. ipvsproxy creates its file there 0600: a hostPath file
// (FileOrCreate) is created 0644, and any local user could hold its flock.
var nodeLocks = []hostMount{
	{"/run/xtables.lock", false, corev1.HostPathFileOrCreate},
	{filepath.Dir(nodelock.DefaultPath), false, corev1.HostPathDirectoryOrCreate},
}

type hostMount struct {
	path     string
	readOnly bool
	hostType corev1.HostPathType
}

func checkHostMountsOf(t *testing.T, dir string, pod corev1.PodSpec, c *corev1.Container, wanted []hostMount) {
	t.Helper()
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	for _, want := range wanted {
		m, ok := mounts[want.path]
		if !ok {
			t.Errorf("%s: nothing mounted at %s", dir, want.path)
			continue
		}
		if m.ReadOnly != want.readOnly {
			t.Errorf("%s: %s readOnly=%v, want %v", dir, want.path, m.ReadOnly, want.readOnly)
		}
		v := volumes[m.Name]
		if v.HostPath == nil || v.HostPath.Path != want.path {
			t.Errorf("%s: %s is not the host's %s: %+v", dir, want.path, want.path, v.VolumeSource)
			continue
		}
		got := corev1.HostPathType("")
		if v.HostPath.Type != nil {
			got = *v.HostPath.Type
		}
		if got != want.hostType {
			t.Errorf("%s: hostPath %s type %q, want %q", dir, want.path, got, want.hostType)
		}
	}
}

// The example overlay changes what it says it changes and keeps the rest.
func TestOverlayPatchesBase(t *testing.T) {
	base, overlay := renderTyped(t, "base"), renderTyped(t, "overlays/example")
	bc, oc := proxyContainer(t, base.daemonSet), proxyContainer(t, overlay.daemonSet)
	// A name nobody can publish under: the user sets the image.
	if !strings.HasPrefix(bc.Image, "registry.invalid/ipvsproxy:") {
		t.Errorf("base image %q, want the placeholder registry.invalid/ipvsproxy:<tag>", bc.Image)
	}
	if oc.Image != "registry.example.com/ipvsproxy/ipvsproxy:0.1.0-rc.1" {
		t.Errorf("overlay image %q", oc.Image)
	}
	if got := overlay.config.Data["IPVSPROXY_CLUSTER_CIDR"]; got != "10.244.0.0/16" {
		t.Errorf("overlay cluster CIDR %q", got)
	}
	for k, v := range base.config.Data {
		if overlay.config.Data[k] != v {
			t.Errorf("overlay lost or changed %s=%s", k, v)
		}
	}
	if got := oc.Resources.Requests.Memory().String(); got != "128Mi" {
		t.Errorf("overlay memory request %s, want 128Mi", got)
	}
	// A strategic merge keeps what the patch does not mention.
	if !oc.Resources.Requests.Cpu().Equal(*bc.Resources.Requests.Cpu()) {
		t.Errorf("overlay cpu request %v, want the base's %v", oc.Resources.Requests.Cpu(), bc.Resources.Requests.Cpu())
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range oc.Env {
		env[e.Name] = e
	}
	if env["KUBERNETES_SERVICE_HOST"].Value == "" || env["KUBERNETES_SERVICE_PORT"].Value == "" {
		t.Errorf("overlay does not point the proxy at the API server's address: %+v", oc.Env)
	}
	if _, kept := env["IPVSPROXY_HOSTNAME_OVERRIDE"]; !kept || len(oc.Env) != len(bc.Env)+2 {
		t.Errorf("overlay env %+v does not extend the base's %+v", oc.Env, bc.Env)
	}
	if oc.LivenessProbe == nil || len(oc.VolumeMounts) != len(bc.VolumeMounts) {
		t.Errorf("overlay container lost fields of the base: %+v", oc)
	}
}

func TestSplitImage(t *testing.T) {
	for image, want := range map[string][3]string{
		"ipvsproxy/ipvsproxy:v1":           {"ipvsproxy/ipvsproxy", "v1", ""},
		"registry:5000/a/b":                {"registry:5000/a/b", "", ""},
		"registry:5000/a/b:v2@sha256:0123": {"registry:5000/a/b", "v2", "sha256:0123"},
		"b@sha256:0123":                    {"b", "", "sha256:0123"},
	} {
		r, tag, d := splitImage(image)
		if got := [3]string{r, tag, d}; got != want {
			t.Errorf("splitImage(%q) = %q, want %q", image, got, want)
		}
	}
}

// The container runs with the least the kernel needs, so a compromised daemon can do little: no
// privilege escalation, the runtime's seccomp profile, a read-only root,
// a memory limit, and CAP_SYS_MODULE with /lib/modules only in the overlay
// that asks for it.
func TestContainerIsHardened(t *testing.T) {
	for _, dir := range kustomizations {
		r := renderTyped(t, dir)
		c := proxyContainer(t, r.daemonSet)
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("%s: no securityContext", dir)
			continue
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("%s: privileged", dir)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: allowPrivilegeEscalation is not false", dir)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: readOnlyRootFilesystem is not true", dir)
		}
		if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: seccompProfile %+v, want RuntimeDefault", dir, sc.SeccompProfile)
		}
		if sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("%s: capabilities %+v, want drop ALL", dir, sc.Capabilities)
			continue
		}
		want := []corev1.Capability{"NET_ADMIN", "NET_RAW"}
		if dir == "overlays/modprobe" {
			want = append(want, "SYS_MODULE")
			checkHostMountsOf(t, dir, r.daemonSet.Spec.Template.Spec, c, []hostMount{{"/lib/modules", true, ""}})
		} else {
			for _, m := range c.VolumeMounts {
				if m.MountPath == "/lib/modules" {
					t.Errorf("%s: /lib/modules is mounted without CAP_SYS_MODULE to use it", dir)
				}
			}
		}
		if !reflect.DeepEqual(sc.Capabilities.Add, want) {
			t.Errorf("%s: capabilities add %v, want %v", dir, sc.Capabilities.Add, want)
		}
		if c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: no memory limit", dir)
		} else if c.Resources.Limits.Memory().Cmp(*c.Resources.Requests.Memory()) < 0 {
			t.Errorf("%s: memory limit %v below the request %v", dir, c.Resources.Limits.Memory(), c.Resources.Requests.Memory())
		}
	}
}

// The conformance overlay (e2e/conformance) runs the image `make image`
// names and images.sh imports into containerd, pinned by digest in run.sh:
// another repository would be pulled, and never found (ImagePullBackOff on
// every node).
func TestConformanceOverlayRunsTheImportedImage(t *testing.T) {
	r := renderTyped(t, "../e2e/conformance/overlay")
	if repo, _, _ := splitImage(proxyContainer(t, r.daemonSet).Image); repo != "registry.invalid/ipvsproxy" {
		t.Fatalf("conformance overlay image repository %q, want registry.invalid/ipvsproxy (the Makefile's IMAGE)", repo)
	}
}
