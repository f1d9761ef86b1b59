package servicetest

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update is the -update flag of every test binary that imports this package:
// it rewrites the golden files instead of comparing with them. A package
// that imports this one must not define its own -update flag (the flag
// package panics at start-up on the second definition).
var update = flag.Bool("update", false, "rewrite the golden files")

// CheckGolden compares got with the golden file at path; on a mismatch it
// prints got whole, ready to paste. With -update it rewrites the file
// instead.
func CheckGolden(t testing.TB, path, got string) {
	t.Helper()
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
		t.Fatalf("%v (run the test %s with -update to create it); got:\n%s", err, t.Name(), got)
	}
	if string(want) != got {
		t.Errorf("got differs from the golden file %s; got:\n%s\nwant:\n%s", path, got, want)
	}
}
