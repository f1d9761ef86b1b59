package docs

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/doctable"
)

// TestREADMEFiguresAreThePerformanceTables: each row of the README's table
// of figures is a row of performance.md's summary table, the same measure
// with the same values and ratio.
func TestREADMEFiguresAreThePerformanceTables(t *testing.T) {
	for _, mode := range []string{"kube-proxy, nftables mode", "kube-proxy, IPVS mode"} {
		t.Run(mode, func(t *testing.T) { checkREADMEFigures(t, mode) })
	}
}

func checkREADMEFigures(t *testing.T, mode string) {
	cols := []string{"measure, Services × 10 endpoints", "ipvsproxy", mode, "ratio"}
	readme, err := doctable.Read("../README.md", cols...)
	if err != nil {
		t.Fatal(err)
	}
	summary, err := doctable.Read("performance.md", append(cols, "tier, commit, date")...)
	if err != nil {
		t.Fatal(err)
	}
	if len(readme) == 0 {
		t.Fatal("the README's table of figures is empty")
	}
	for _, r := range readme {
		found := false
		for _, s := range summary {
			if s[cols[0]] != r[cols[0]] {
				continue
			}
			found = true
			for _, c := range cols[1:] {
				if s[c] != r[c] {
					t.Errorf("README: %q: %s is %q, performance.md says %q", r[cols[0]], c, r[c], s[c])
				}
			}
		}
		if !found {
			t.Errorf("README: %q is not in performance.md's table of where ipvsproxy stands", r[cols[0]])
		}
	}
}

// peakAt is "81.2 MiB at 10,000" in a manifest's comment.
var peakAt = regexp.MustCompile(`([0-9]+(?:\.[0-9]+)?) MiB\s*(?:#\s*)?at\s*(?:#\s*)?([0-9]+(?:,[0-9]{3})*)`)

// TestManifestMemoryFiguresAreTheLimitsTable: a peak RSS a manifest's
// comment quotes beside a Service count is the peak performance.md's table
// of memory limits gives for that count.
func TestManifestMemoryFiguresAreTheLimitsTable(t *testing.T) {
	rows, err := doctable.Read("performance.md", "Services × 10 endpoints", "ipvsproxy peak RSS", "memory request", "memory limit", "GOMEMLIMIT")
	if err != nil {
		t.Fatal(err)
	}
	peaks := map[string]string{}
	for _, row := range rows {
		count := strings.TrimPrefix(row["Services × 10 endpoints"], "up to ")
		peaks[count] = strings.Fields(row["ipvsproxy peak RSS"])[0]
	}
	checked := 0
	for _, path := range []string{"../deploy/helm/ipvsproxy/values.yaml", "../deploy/base/daemonset.yaml"} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range peakAt.FindAllStringSubmatch(string(data), -1) {
			want, ok := peaks[m[2]]
			if !ok {
				t.Errorf("%s quotes %s MiB at %s Services; performance.md's limits table has no row for %s", path, m[1], m[2], m[2])
				continue
			}
			if !sameFigure(m[1], want) {
				t.Errorf("%s quotes %s MiB at %s Services; performance.md's limits table says %s MiB", path, m[1], m[2], want)
			}
			checked++
		}
	}
	if checked < 3 {
		t.Fatalf("found only %d quoted peaks in the manifests", checked)
	}
}

func sameFigure(a, b string) bool {
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	return err1 == nil && err2 == nil && x == y
}
