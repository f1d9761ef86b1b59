// Package kerneltest is the one way a test that touches the real kernel
// skips. Outside CI a skip is a skip; under CI (CI=true, or inside the
// project's VM, where IPVSPROXY_IN_VM=1) a kernel test that cannot run is a
// failure, unless its reason is listed in accepted below for that place: CI
// runs as root with every tool of e2e/install-deps.sh installed, so anything
// else missing means the test bed is broken, and a silent skip would hide it.
package kerneltest

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Reason says what a kernel test found missing.
type Reason string

const (
	// NotRoot: the test needs root (network namespaces, netlink writes).
	NotRoot Reason = "not root"
	// NoTool: a program the test drives (ip, iptables, ipset, conntrack, nft,
	// unshare) is not on PATH.
	NoTool Reason = "tool missing"
	// NoKernelFeature: the kernel lacks something the host's is known to have
	// (ip_set, conntrack netlink, an iptables back end, the ifb link).
	NoKernelFeature Reason = "kernel feature missing"
	// NoIPVS: the kernel has no IPVS, or lacks one of its schedulers.
	NoIPVS Reason = "kernel has no IPVS"
	// NoDummy: the kernel has no dummy network driver.
	NoDummy Reason = "kernel has no dummy driver"
	// NoSCTP: the kernel has no SCTP (no sctp module to load).
	NoSCTP Reason = "kernel has no SCTP"
)

// accepted lists, in one place, the reasons CI accepts and where. On the CI
// host (CI=true, not in the VM) only the three the host kernel cannot give:
// it is built without IPVS, the dummy driver and SCTP, and `make vm-test`
// runs exactly those halves in the VM (VM_PKGS in the Makefile). Inside the
// VM nothing is accepted: its kernel has both, and its root file system is
// the host's, so every tool is there too.
//
// Not in this list because they are not kernel tests and skip through
// t.Skip as before: deploy/test/apply without IPVSPROXY_TEST_KUBECONFIG (the
// API server exists only in `make e2e`, which runs it), healthcheck's
// starvation test under -short (a choice of the caller, CI does not pass
// -short), and conntrack-bench's TestSideProcess outside its parent (it is
// the child process TestRealKernel starts, never a test on its own).
var accepted = map[Reason]string{
	NoIPVS:  "the CI host's kernel has no IPVS; make vm-test runs these tests in the VM",
	NoDummy: "the CI host's kernel has no dummy driver; make vm-test runs these tests in the VM",
	NoSCTP:  "the CI host's kernel has no SCTP; make vm-test runs these tests in the VM",
}

// KernelWithoutTwos reports whether the VM boots a kernel known to lack the
// twos IPVS scheduler: Debian 12's 6.1 kernels (IPVSPROXY_VM_KERNEL 6.1 or
// cloud, e2e/vm/prepare.sh) are built without CONFIG_IP_VS_TWOS. A test of
// twos expects the kernel's refusal there, and the daemon falls back to wrr;
// on any other kernel of the VM, twos missing is a failure.
func KernelWithoutTwos() bool {
	if !InVM() {
		return false
	}
	switch os.Getenv("IPVSPROXY_VM_KERNEL") {
	case "6.1", "cloud":
		return true
	}
	return false
}

// InVM reports whether the test runs inside the project's VM
// (e2e/vm/test-guest.sh sets IPVSPROXY_IN_VM=1).
func InVM() bool { return os.Getenv("IPVSPROXY_IN_VM") == "1" }

// Strict reports whether a skip for an unaccepted reason fails the test.
func Strict() bool { return os.Getenv("CI") == "true" || InVM() }

// Accepted reports whether reason may skip here under CI, and why.
func Accepted(reason Reason) (string, bool) {
	if InVM() {
		return "", false
	}
	why, ok := accepted[reason]
	return why, ok
}

// Skip skips the test, or fails it under CI when reason is not accepted here.
func Skip(t testing.TB, reason Reason, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if !Strict() {
		t.Skipf("%s: %s", reason, msg)
	}
	if why, ok := Accepted(reason); ok {
		t.Skipf("%s: %s (accepted under CI: %s)", reason, msg, why)
	}
	where := "CI=true"
	if InVM() {
		where = "in the VM (IPVSPROXY_IN_VM=1)"
	}
	t.Fatalf("kernel test cannot run (%s: %s), and %s accepts no such skip: see internal/kerneltest", reason, msg, where)
}

// RequireRootAndTools skips the test (under CI: fails) unless it runs as
// root with each of tools on PATH.
func RequireRootAndTools(t testing.TB, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skip(t, NotRoot, "needs root")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			Skip(t, NoTool, "no %s (e2e/install-deps.sh installs it)", tool)
		}
	}
}
