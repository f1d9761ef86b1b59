package main

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The archive mkimage writes reads back as the image asked for: its tag, platform, entrypoint,
// and a file tree with the added file's content, the link, the sticky /tmp and every parent.
func TestImageArchiveReadsBack(t *testing.T) {
	if os.Getenv("MKIMAGE_MAIN") == "1" {
		os.Args = append([]string{"mkimage"}, strings.Split(os.Getenv("MKIMAGE_ARGS"), "\n")...)
		main()
		return
	}
	dir := t.TempDir()
	src, out := filepath.Join(dir, "server"), filepath.Join(dir, "image.tar")
	if err := os.WriteFile(src, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"-o", out, "-tag", "registry.k8s.io/e2e-test-images/agnhost:2.63.0",
		"-add", src + "=/usr/bin/server", "-symlink", "/agnhost-2=agnhost", "-dir", "/tmp=1777",
		"-entrypoint", "/usr/bin/server", "-cmd", `["pause","--x"]`}
	cmd := exec.Command(os.Args[0], "-test.run=TestImageArchiveReadsBack")
	cmd.Env = append(os.Environ(), "MKIMAGE_MAIN=1", "MKIMAGE_ARGS="+strings.Join(args, "\n"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mkimage: %v\n%s", err, b)
	}

	tag, _ := name.NewTag("registry.k8s.io/e2e-test-images/agnhost:2.63.0")
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatalf("read back %s as %s: %v", out, tag, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("platform %s/%s, want linux/amd64", cf.OS, cf.Architecture)
	}
	if !reflect.DeepEqual(cf.Config.Entrypoint, []string{"/usr/bin/server"}) || !reflect.DeepEqual(cf.Config.Cmd, []string{"pause", "--x"}) {
		t.Errorf("entrypoint %q cmd %q", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	got := map[string]string{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		got[h.Name] = fmt.Sprintf("%c %o %s%s", h.Typeflag, h.Mode, h.Linkname, body)
	}
	want := map[string]string{
		"agnhost-2":      "2 777 agnhost",
		"tmp":            "5 1777 ",
		"usr":            "5 755 ",
		"usr/bin":        "5 755 ",
		"usr/bin/server": "0 755 #!/bin/sh\necho hi\n",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("files:\n%q\nwant:\n%q", got, want)
	}
}
