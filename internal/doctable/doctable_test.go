package doctable

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestReadFindsTheTableByItsHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "page.md")
	text := "# Page\n\n| a | b |\n| --- | --- |\n| 1 | 2 |\n\n| `name` | type | meaning |\n| --- | --- | --- |\n| `x_total` | counter | what `x` counts |\n| `y` | gauge | why |\n\nafter\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	rows, err := Read(path, "name", "type", "meaning")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0]["name"] != "`x_total`" || rows[1]["type"] != "gauge" {
		t.Fatalf("rows = %v", rows)
	}
	if got := Code(rows[0]["meaning"]); !slices.Equal(got, []string{"x"}) {
		t.Errorf("Code = %q", got)
	}
	if _, err := Read(path, "name", "type"); err == nil {
		t.Error("a header that matches no table was accepted")
	}
	bad := filepath.Join(t.TempDir(), "bad.md")
	if err := os.WriteFile(bad, []byte("| a | b |\n| --- | --- |\n| 1 |\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(bad, "a", "b"); err == nil {
		t.Error("a row with a missing cell was accepted")
	}
}
