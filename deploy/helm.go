package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ChartNamespace is the namespace charts are rendered into, as
// `helm install -n kube-system` does: the kustomize base's namespace.
const ChartNamespace = "kube-system"

// IsChart reports whether dir is a Helm chart (it has a Chart.yaml).
func IsChart(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "Chart.yaml"))
	return err == nil
}

// RenderChart renders the Helm chart in dir with Helm's own engine (what
// `helm template` runs, in process: no helm binary needed), its values
// overridden by valuesFiles in order as `-f` does, and decodes the objects,
// duplicate keys refused. The chart's values.schema.json is enforced and
// the engine is strict: a misspelt value or a template reading a value that
// does not exist is an error.
func RenderChart(dir string, valuesFiles ...string) ([]*unstructured.Unstructured, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	user := map[string]any{}
	for _, f := range valuesFiles {
		v, err := chartutil.ReadValuesFile(f)
		if err != nil {
			return nil, fmt.Errorf("chart %s: values %s: %w", dir, f, err)
		}
		user = chartutil.CoalesceTables(v.AsMap(), user)
	}
	opts := chartutil.ReleaseOptions{Name: ch.Name(), Namespace: ChartNamespace, Revision: 1, IsInstall: true}
	values, err := chartutil.ToRenderValues(ch, user, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", dir, err)
	}
	files, err := engine.Engine{Strict: true}.Render(ch, values)
	if err != nil {
		return nil, fmt.Errorf("render chart %s: %w", dir, err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var objs []*unstructured.Unstructured
	for _, name := range names {
		base := filepath.Base(name)
		if strings.HasPrefix(base, "_") || !strings.HasSuffix(base, ".yaml") {
			continue // helpers and NOTES.txt
		}
		o, err := readObjects(strings.NewReader(files[name]), name)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o...)
	}
	return objs, nil
}
