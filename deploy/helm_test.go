package deploy

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/diff"
	"sigs.k8s.io/yaml"
)

const chartDir = "helm/ipvsproxy"

// The chart renders the same objects as kustomize: with its defaults the
// base, with each ci/ values file the overlay of that name. Compared typed
// and field by field, so a setting the chart forgets (or adds) fails here.
func TestChartRendersTheKustomizations(t *testing.T) {
	for _, c := range []struct{ values, kustomization string }{
		{"", "base"},
		{"ci/example-values.yaml", "overlays/example"},
		{"ci/kubeadm-values.yaml", "overlays/kubeadm"},
		{"ci/kube-proxy-labels-values.yaml", "overlays/kube-proxy-labels"},
		{"ci/modprobe-values.yaml", "overlays/modprobe"},
		{"ci/migrate-values.yaml", "overlays/migrate"},
		{"ci/node-watch-values.yaml", "overlays/node-watch"},
	} {
		t.Run(c.kustomization, func(t *testing.T) {
			var files []string
			if c.values != "" {
				files = append(files, filepath.Join(chartDir, c.values))
			}
			chart, err := RenderChart(chartDir, files...)
			if err != nil {
				t.Fatal(err)
			}
			kustomized, err := Render(c.kustomization)
			if err != nil {
				t.Fatal(err)
			}
			want, got := byKindName(t, kustomized), byKindName(t, chart)
			for key, w := range want {
				g, ok := got[key]
				if !ok {
					t.Errorf("the chart has no %s", key)
					continue
				}
				if !equality.Semantic.DeepEqual(w, g) {
					t.Errorf("%s differs from %s (- kustomize, + chart):\n%s", key, c.kustomization, diff.Diff(w, g))
				}
			}
			for key := range got {
				if _, ok := want[key]; !ok {
					t.Errorf("the chart renders %s, which %s does not", key, c.kustomization)
				}
			}
		})
	}
}

func byKindName(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, o := range objs {
		typed, err := Decode(o)
		if err != nil {
			t.Fatal(err)
		}
		out[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = typed
	}
	return out
}

// Every flag the migration guide documents has a value in values.yaml, and
// the schema admits exactly those: a flag added to ipvsproxy without a
// value fails here, and so does a value that is no flag.
func TestChartHasAValueForEveryFlag(t *testing.T) {
	documented, err := DocumentedFlags(migrateDoc)
	if err != nil {
		t.Fatal(err)
	}
	values := readYAML(t, filepath.Join(chartDir, "values.yaml"))
	flags, _ := values["flags"].(map[string]any)
	schema := readYAML(t, filepath.Join(chartDir, "values.schema.json"))
	schemaFlags := schema["properties"].(map[string]any)["flags"].(map[string]any)["properties"].(map[string]any)
	// Set by the DaemonSet itself, or by kubeProxyConfig; lock-file is the
	// host file the DaemonSet mounts at the flag's default path.
	bySpec := map[string]bool{"hostname-override": true, "sysctl-root": true, "config": true, "lock-file": true}
	for flag := range documented {
		name := strings.TrimPrefix(flag, "--")
		if bySpec[name] {
			if _, ok := flags[name]; ok {
				t.Errorf("values.yaml has flags.%s, which the DaemonSet sets itself", name)
			}
			continue
		}
		if _, ok := flags[name]; !ok {
			t.Errorf("values.yaml has no flags.%s", name)
		}
	}
	var names []string
	for name := range flags {
		names = append(names, name)
		if _, ok := documented["--"+name]; !ok {
			t.Errorf("values.yaml has flags.%s, which is no documented flag", name)
		}
		if _, ok := schemaFlags[name]; !ok {
			t.Errorf("values.schema.json does not admit flags.%s", name)
		}
	}
	if len(schemaFlags) != len(flags) {
		sort.Strings(names)
		t.Errorf("values.schema.json admits %d flags, values.yaml has %d: %v", len(schemaFlags), len(flags), names)
	}
}

// Every flag value reaches the ConfigMap as its IPVSPROXY_* variable, in the
// flag's syntax (whole numbers without an exponent); a misspelt flag or value
// is refused by the schema instead of being dropped.
func TestChartFlagValues(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	objs, err := RenderChart(chartDir, write("v.yaml", `
flags:
  conntrack-min: 1048576
  kube-api-qps: 7.5
  ipvs-scheduler: mh
  ipvs-scheduler-flags: mh-port
  masquerade-all: true
  ipvs-sync-period: null
`))
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]string
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" {
			data, _, _ = unstructured.NestedStringMap(o.Object, "data")
		}
	}
	for key, want := range map[string]string{
		"IPVSPROXY_CONNTRACK_MIN":        "1048576",
		"IPVSPROXY_KUBE_API_QPS":         "7.5",
		"IPVSPROXY_IPVS_SCHEDULER":       "mh",
		"IPVSPROXY_IPVS_SCHEDULER_FLAGS": "mh-port",
		"IPVSPROXY_MASQUERADE_ALL":       "true",
		"IPVSPROXY_METRICS_BIND_ADDRESS": "127.0.0.1:10249",
		"IPVSPROXY_IPVS_MIN_SYNC_PERIOD": "100ms",
		"IPVSPROXY_HEALTHZ_BIND_ADDRESS": "0.0.0.0:10256",
		"IPVSPROXY_IPVS_STRICT_ARP":      "false",
	} {
		if data[key] != want {
			t.Errorf("%s = %q, want %q", key, data[key], want)
		}
	}
	if _, ok := data["IPVSPROXY_IPVS_SYNC_PERIOD"]; ok {
		t.Errorf("a null flag is in the ConfigMap: %v", data)
	}
	for _, bad := range []string{"flags:\n  ipvs-sheduler: rr\n", "imagee:\n  tag: x\n", "modprobe: \"yes\"\n"} {
		if _, err := RenderChart(chartDir, write("bad.yaml", bad)); err == nil {
			t.Errorf("values %q rendered; want a schema error", bad)
		}
	}
}

func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// `helm lint` (Helm's own rules: Chart.yaml, values, templates, the
// rendered YAML, deprecated APIs) finds nothing above INFO, with the
// defaults and with every ci/ values file.
func TestChartLints(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append([]string{""}, files...) {
		values := map[string]any{}
		if f != "" {
			values = readYAML(t, f)
		}
		linter := lint.All(chartDir, values, ChartNamespace, false)
		for _, m := range linter.Messages {
			if m.Severity > support.InfoSev {
				t.Errorf("helm lint %s: %s", f, m)
			}
		}
	}
}
