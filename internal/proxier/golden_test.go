package proxier

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func itoa(i int) string { return strconv.Itoa(i) }

// checkGolden compares got with testdata/rules/NAME.golden; on mismatch it
// prints got whole, ready to paste (or run with -update).
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "rules", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/proxier -run %s -update to create it); got:\n%s", err, t.Name(), got)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file %s; got:\n%s\nwant:\n%s", name, path, got, want)
	}
}
