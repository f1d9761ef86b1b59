package release

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `make image` twice, into two directories, gives one digest and the same
// archive byte for byte: the binaries (Go's builds are reproducible, the
// Makefile's flags fixed), the Debian trees (build-rootfs.sh: sorted, the
// commit's time on every file) and the image around them. The second build
// finds the first one's Go cache and .debs, as a rebuild on the same machine
// does; release/image's tests cover the image's own part from the same
// inputs at another time of day. The second build is the repository's own
// _output/image, which the end-to-end and conformance runs of the same tree
// then keep (IMAGE_REUSE=1) instead of building it a third time.
func TestMakeImageTwiceGivesOneDigest(t *testing.T) {
	var refs [2]string
	var archives [2][]byte
	for i := range refs {
		dir := t.TempDir()
		if i == 1 {
			abs, err := filepath.Abs("../_output/image")
			if err != nil {
				t.Fatal(err)
			}
			dir = abs
		}
		cmd := exec.Command("make", "--no-print-directory", "-C", "..", "image", "IMAGE_DIR="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make image: %v\n%s", err, out)
		}
		if bytes.Contains(out, []byte("NOT CHECKED")) && os.Getuid() == 0 {
			t.Errorf("check-rootfs did not run as root:\n%s", out)
		}
		ref, err := os.ReadFile(filepath.Join(dir, "IMAGE"))
		if err != nil {
			t.Fatal(err)
		}
		refs[i] = strings.TrimSpace(string(ref))
		matches, _ := filepath.Glob(filepath.Join(dir, "ipvsproxy-*.oci.tar"))
		if len(matches) != 1 {
			t.Fatalf("archives %v", matches)
		}
		if archives[i], err = os.ReadFile(matches[0]); err != nil {
			t.Fatal(err)
		}
	}
	if refs[0] != refs[1] || !strings.Contains(refs[0], "@sha256:") {
		t.Errorf("two builds of one commit: %s and %s", refs[0], refs[1])
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Errorf("two builds of one commit wrote different archives (%d and %d bytes)", len(archives[0]), len(archives[1]))
	}
	t.Logf("both builds: %s", refs[0])
}
