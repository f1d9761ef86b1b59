package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// The logging block is validated as kube-proxy validates it: json with
// vmodule is refused, json alone and text with vmodule are fine.
func TestLoggingConfigFromFile(t *testing.T) {
	kubeadm, err := os.ReadFile("testdata/kubeadm-config.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		logging, want string
	}{
		{"logging:\n  format: json\n  verbosity: 2\n", ""},
		{"logging:\n  format: text\n  vmodule:\n    - {filePattern: sync*, verbosity: 4}\n", ""},
		{"logging:\n  format: json\n  vmodule:\n    - {filePattern: sync*, verbosity: 4}\n", "Only supported for text log format"},
		{"logging:\n  format: xml\n", "xml"},
	} {
		content := string(kubeadm)
		i := strings.Index(content, "logging:\n")
		j := strings.Index(content, "metricsBindAddress:")
		content = content[:i] + c.logging + content[j:]
		path := filepath.Join(t.TempDir(), "config.conf")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		var got error
		app := newApp()
		app.Writer, app.ErrWriter = &bytes.Buffer{}, &bytes.Buffer{}
		for _, cmd := range app.Commands {
			if cmd.Name == "run" {
				cmd.Action = func(ctx *cli.Context) error {
					if _, _, err := loadConfig(ctx); err != nil {
						got = err
						return nil
					}
					_, got = loggingConfig(ctx)
					return nil
				}
			}
		}
		if err := app.Run([]string{"ipvsproxy", "run", "--config", path}); err != nil {
			t.Fatal(err)
		}
		if (c.want == "") != (got == nil) || (got != nil && !strings.Contains(got.Error(), c.want)) {
			t.Errorf("%q: got %v, want %q", c.logging, got, c.want)
		}
	}
}
