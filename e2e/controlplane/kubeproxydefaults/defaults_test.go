// Package kubeproxydefaults holds docs/flags.md's table of defaults to
// kube-proxy's own defaulting, at the Kubernetes version this module builds
// the control plane and kube-proxy from (k8s.io/kubernetes is a dependency
// of this module, never of the product's).
package kubeproxydefaults

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	kubeproxyconfigv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeproxydefaults "k8s.io/kubernetes/pkg/proxy/apis/config/v1alpha1"
)

// defaulted is an empty KubeProxyConfiguration after kube-proxy's own
// SetDefaults, as JSON fields.
func defaulted(t *testing.T) map[string]any {
	t.Helper()
	var cfg kubeproxyconfigv1alpha1.KubeProxyConfiguration
	kubeproxydefaults.SetDefaults_KubeProxyConfiguration(&cfg)
	raw, err := json.Marshal(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// field follows a dotted JSON path ("ipvs.scheduler") and renders what it
// finds as the table does: a string as JSON ("" for empty), else as JSON.
func field(t *testing.T, obj map[string]any, path string) (string, bool) {
	t.Helper()
	var cur any = obj
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false
		}
		if cur, ok = m[part]; !ok {
			return "", false
		}
	}
	if s, ok := cur.(string); ok && s != "" {
		return s, true
	}
	raw, _ := json.Marshal(cur)
	return string(raw), true
}

// TestKubeProxyDefaultsAreAsDocumented: every row of docs/flags.md's
// defaults table that names a KubeProxyConfiguration field gives the value
// kube-proxy's defaulting leaves in it.
func TestKubeProxyDefaultsAreAsDocumented(t *testing.T) {
	rows := defaultsTable(t, "../../../docs/flags.md")
	cfg := defaulted(t)
	checked := 0
	for _, row := range rows {
		cell := row["KubeProxyConfiguration field"]
		if cell == "—" {
			continue
		}
		spans := codeSpan.FindAllStringSubmatch(cell, -1)
		if len(spans) != 1 || !strings.Contains(spans[0][1], ": ") {
			t.Errorf("row %q: want `path: value` in the field column, got %q", row["setting"], cell)
			continue
		}
		path, want, _ := strings.Cut(spans[0][1], ": ")
		got, ok := field(t, cfg, path)
		if !ok {
			t.Errorf("row %q: KubeProxyConfiguration has no field %s", row["setting"], path)
			continue
		}
		if got != want {
			t.Errorf("row %q: kube-proxy's defaulting leaves %s = %s, the table says %s", row["setting"], path, got, want)
		}
		checked++
	}
	if checked < 2 {
		t.Fatalf("checked %d rows against kube-proxy's defaults", checked)
	}
	// The rows' kube-proxy values that the defaulting does not hold: an
	// empty scheduler is rr in its IPVS proxier (pkg/proxy/ipvs, defaultScheduler).
}

var codeSpan = regexp.MustCompile("`([^`]*)`")

// defaultsTable reads the rows of the table of defaults by its header (the
// main module's internal/doctable does this for the product's tests; this
// module does not depend on the product).
func defaultsTable(t *testing.T, path string) []map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	columns := []string{"setting", "ipvsproxy flag", "ipvsproxy default", "KubeProxyConfiguration field", "kube-proxy IPVS mode", "why"}
	header := "| " + strings.Join(columns, " | ") + " |"
	lines := strings.Split(string(data), "\n")
	var rows []map[string]string
	for i, line := range lines {
		if strings.TrimSpace(line) != header {
			continue
		}
		for _, row := range lines[i+2:] {
			row = strings.TrimSpace(row)
			if !strings.HasPrefix(row, "|") {
				break
			}
			cells := strings.Split(strings.Trim(row, "|"), "|")
			if len(cells) != len(columns) {
				t.Fatalf("%s: %q has %d cells, want %d", path, row, len(cells), len(columns))
			}
			m := map[string]string{}
			for j, c := range columns {
				m[c] = strings.TrimSpace(cells[j])
			}
			rows = append(rows, m)
		}
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no table headed %s", path, header)
	}
	return rows
}
