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

func TestCommandsReadsTheMarkedBlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "guide.md")
	text := "intro\n\n1. Step:\n\n   <!-- commands: start -->\n   ```sh\n   kubectl label node --all k=v\n   kubectl -n kube-system patch daemonset kube-proxy \\\n     --patch-file deploy/x.yaml\n   # or: helm install it\n   curl http://NODE:10256/readyz        # 200 once synced\n   ```\n\n<!-- commands: empty -->\n```sh\n# nothing\n```\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Commands(path, "start")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"kubectl label node --all k=v",
		"kubectl -n kube-system patch daemonset kube-proxy --patch-file deploy/x.yaml",
		"curl http://NODE:10256/readyz",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Commands = %q\nwant %q", got, want)
	}
	if _, err := Commands(path, "empty"); err == nil {
		t.Error("a block without a command was accepted")
	}
	if _, err := Commands(path, "missing"); err == nil {
		t.Error("a missing block was accepted")
	}
}
