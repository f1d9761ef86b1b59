package ipset

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Listing hash sets made by the ipset tool (as kube-proxy makes them) on
// this kernel makes github.com/vishvananda/netlink print, through the
// standard logger, a line for each attribute it does not know
// (IPSET_ATTR_BUCKETSIZE, IPSET_ATTR_INITVAL). None of it may reach stderr:
// it goes to klog at a verbosity nobody runs with by default.
func TestListingSetsPrintsNothingOfTheLibraryToStderr(t *testing.T) {
	k, ns := kernelInNamespace(t)
	run(t, "ip", "netns", "exec", ns, "sh", "-ec", `ipset create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536
ipset add KUBE-CLUSTER-IP 192.0.2.10,tcp:80
ipset create KUBE-6-CLUSTER-IP hash:ip,port family inet6 hashsize 1024 maxelem 65536
ipset create KUBE-NODE-PORT-LOCAL-TCP bitmap:port range 0-65535`)
	stderr := captureStderr(t, func() {
		sets, err := k.Sets()
		if err != nil || len(sets) != 3 {
			t.Errorf("Sets() = %v, %v; want the 3 sets", sets, err)
		}
		if _, err := k.Entries("KUBE-CLUSTER-IP"); err != nil {
			t.Error(err)
		}
	})
	if strings.Contains(stderr, "from kernel") {
		t.Errorf("the library's own log reached stderr:\n%s", stderr)
	}
}

// captureStderr runs f with file descriptor 2 (where the standard logger
// and klog write) redirected to a file, and returns what was written.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	tmp, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer tmp.Close()
	saved, err := unix.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Dup2(int(tmp.Fd()), 2); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			unix.Dup2(saved, 2)
			unix.Close(saved)
		}()
		f()
	}()
	out, err := os.ReadFile(tmp.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
