package deploy

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// GOMEMLIMIT is the collector's soft limit; the container's memory limit is
// the cgroup's hard one, which also counts what is not Go heap (the
// iptables-restore children, stacks, the runtime). A soft limit above 90%
// of the hard one leaves the collector no room before the OOM killer; one
// far below wastes the limit (an overlay that raised the limit and forgot
// GOMEMLIMIT).
const (
	maxGoMemLimitRatio = 0.90
	minGoMemLimitRatio = 0.75
)

func TestGoMemLimitLeavesHeadroom(t *testing.T) {
	for _, dir := range append(kustomizations, "../e2e/conformance/overlay") {
		r := renderTyped(t, dir)
		checkGoMemLimit(t, dir, proxyContainer(t, r.daemonSet))
	}
}

// The chart computes GOMEMLIMIT from resources.limits.memory, so a values
// file that changes the limit keeps the ratio; a limit it cannot read asks
// for goMemLimit instead of rendering a wrong one.
func TestChartGoMemLimitFollowsTheLimit(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		values string
		want   string // "" when rendering must fail
	}{
		{"resources:\n  limits:\n    memory: 512Mi\n", "460MiB"},
		{"resources:\n  limits:\n    memory: 1Gi\n", "921MiB"},
		{"resources:\n  limits:\n    memory: 300M\ngoMemLimit: 250MiB\n", "250MiB"},
		{"resources:\n  limits:\n    memory: 300M\n", ""},
	} {
		file := filepath.Join(dir, "v.yaml")
		if err := os.WriteFile(file, []byte(c.values), 0o644); err != nil {
			t.Fatal(err)
		}
		objs, err := RenderChart(chartDir, file)
		if c.want == "" {
			if err == nil {
				t.Errorf("values %q rendered; want an error asking for goMemLimit", c.values)
			} else if !strings.Contains(err.Error(), "goMemLimit") {
				t.Errorf("values %q: error %v does not name goMemLimit", c.values, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("values %q: %v", c.values, err)
		}
		for _, o := range objs {
			if o.GetKind() != "DaemonSet" {
				continue
			}
			c2 := chartContainer(t, o)
			if got := envValue(c2, "GOMEMLIMIT"); got != c.want {
				t.Errorf("values %q: GOMEMLIMIT %q, want %q", c.values, got, c.want)
			}
			checkGoMemLimit(t, "chart with "+strconv.Quote(c.values), c2)
		}
	}
}

func chartContainer(t *testing.T, o *unstructured.Unstructured) *corev1.Container {
	t.Helper()
	typed, err := Decode(o)
	if err != nil {
		t.Fatal(err)
	}
	ds, ok := typed.(*appsv1.DaemonSet)
	if !ok {
		t.Fatalf("%s is a %T", o.GetName(), typed)
	}
	return proxyContainer(t, ds)
}

func envValue(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// checkGoMemLimit fails unless c sets GOMEMLIMIT as a literal value between
// the two ratios of its memory limit. A value taken from limits.memory
// through the downward API is the limit itself: 100%.
func checkGoMemLimit(t *testing.T, where string, c *corev1.Container) {
	t.Helper()
	limit := c.Resources.Limits.Memory().Value()
	if limit == 0 {
		t.Errorf("%s: no memory limit", where)
		return
	}
	var soft int64 = -1
	for _, e := range c.Env {
		if e.Name != "GOMEMLIMIT" {
			continue
		}
		if f := e.ValueFrom; f != nil && f.ResourceFieldRef != nil && f.ResourceFieldRef.Resource == "limits.memory" {
			soft = limit // the downward API gives bytes, divisor 1
			continue
		}
		n, err := parseGoMemLimit(e.Value)
		if err != nil {
			t.Errorf("%s: GOMEMLIMIT %q: %v", where, e.Value, err)
			return
		}
		soft = n
	}
	if soft < 0 {
		t.Errorf("%s: no GOMEMLIMIT", where)
		return
	}
	ratio := float64(soft) / float64(limit)
	if ratio > maxGoMemLimitRatio || ratio < minGoMemLimitRatio {
		t.Errorf("%s: GOMEMLIMIT is %.0f%% of the memory limit %v (%d of %d bytes), want %.0f%% to %.0f%%",
			where, 100*ratio, c.Resources.Limits.Memory(), soft, limit, 100*minGoMemLimitRatio, 100*maxGoMemLimitRatio)
	}
}

// parseGoMemLimit reads GOMEMLIMIT as the Go runtime does: a whole number of
// bytes with an optional B, KiB, MiB, GiB or TiB suffix.
func parseGoMemLimit(s string) (int64, error) {
	units := []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			return n << u.shift, err
		}
	}
	return strconv.ParseInt(s, 10, 64)
}
