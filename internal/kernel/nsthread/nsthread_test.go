package nsthread

import (
	"os"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
)

// fn runs inside the target namespace, and the caller's thread is back in
// its own afterwards.
func TestDoRunsInsideTheNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.NotRoot, "needs root to create a network namespace")
	}
	target := netnstest.New(t)
	var inside bool
	if err := Do(target, func() {
		cur, err := netns.Get()
		if err != nil {
			t.Error(err)
			return
		}
		defer cur.Close()
		inside = cur.Equal(target)
	}); err != nil {
		t.Fatal(err)
	}
	if !inside {
		t.Fatal("fn did not run inside the target namespace")
	}
	if err := Do(netns.NsHandle(-1), func() { t.Error("fn ran without entering the namespace") }); err == nil {
		t.Fatal("entering an invalid namespace did not fail")
	}
}
