package rules

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
)

var update = flag.Bool("update", false, "rewrite golden files")

// checkGolden compares got with testdata/rules/NAME.golden.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	servicetest.CheckGolden(t, filepath.Join("testdata", "rules"), name, got, *update)
}
