package servicetest

import (
	"os"
	"path/filepath"
	"testing"
)

// CheckGolden compares got with DIR/NAME.golden; on a mismatch it prints got
// whole, ready to paste. With update (each package's -update flag) it
// rewrites the file instead.
func CheckGolden(t testing.TB, dir, name, got string, update bool) {
	t.Helper()
	path := filepath.Join(dir, name+".golden")
	if update {
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
		t.Fatalf("%v (run the test %s with -update to create it); got:\n%s", err, t.Name(), got)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file %s; got:\n%s\nwant:\n%s", name, path, got, want)
	}
}
