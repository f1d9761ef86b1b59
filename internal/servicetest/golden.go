package servicetest

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
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

// CheckGeneratedSection compares the part of the file at path from the
// line begin to the line end (both kept) with got, the text the code
// generates between them. With -update it rewrites that part instead; hint
// says how to run it.
func CheckGeneratedSection(t testing.TB, path, begin, end, got, hint string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	b, e := strings.Index(text, begin), strings.Index(text, end)
	if b < 0 || e < b {
		t.Fatalf("%s: the generated part's markers are missing:\n%s\n%s", path, begin, end)
	}
	want := begin + got + end
	have := text[b : e+len(end)]
	if have == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(text[:b]+want+text[e+len(end):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	haveLines, wantLines := strings.Split(have, "\n"), strings.Split(want, "\n")
	for i := range min(len(haveLines), len(wantLines)) {
		if haveLines[i] != wantLines[i] {
			t.Errorf("%s: line %d of the generated part differs from the code:\n got: %s\nwant: %s", path, i+1, haveLines[i], wantLines[i])
			break
		}
	}
	t.Errorf("%s's generated part differs from the code; rewrite it with `%s`", path, hint)
}
