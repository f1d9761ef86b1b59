package kerneltest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// Module is a kernel module a test needs, and how to tell it is there.
type Module struct {
	// Name is what modprobe loads (ip_vs, dummy).
	Name string
	// Reason is what a test skips with when the module cannot be had.
	Reason Reason
	// Unsupported is the adapter's error for "the kernel lacks this".
	Unsupported error
	// Probe asks the kernel; it fails with Unsupported while the module is
	// not loaded.
	Probe func(t testing.TB) error
}

var (
	modprobeMu  sync.Mutex
	modprobeErr = map[string]error{} // module -> modprobe's outcome
)

// RequireModule skips the test (under CI: fails, unless accepted) unless it
// runs as root with m in the kernel.
func RequireModule(t testing.TB, m Module) {
	t.Helper()
	if reason, msg := m.Unavailable(t); reason != "" {
		Skip(t, reason, "%s", msg)
	}
}

// Unavailable says why a test that needs m cannot run here, or "" when it
// can. A probe that finds m missing loads it with modprobe, once per test
// process, and probes again. Any other error of the probe fails the test:
// that is a bug, not a missing feature.
func (m Module) Unavailable(t testing.TB) (Reason, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return NotRoot, "real-kernel tests with " + m.Name + " need root to create a network namespace"
	}
	err := m.Probe(t)
	if errors.Is(err, m.Unsupported) {
		if merr := modprobe(m.Name); merr != nil {
			return m.Reason, fmt.Sprintf("modprobe %s: %v: %v", m.Name, merr, err)
		}
		err = m.Probe(t)
	}
	if errors.Is(err, m.Unsupported) {
		return m.Reason, fmt.Sprintf("%v, even after modprobe %s", err, m.Name)
	}
	if err != nil {
		t.Fatalf("probing for %s: %v", m.Name, err)
	}
	return "", ""
}

func modprobe(module string) error {
	modprobeMu.Lock()
	defer modprobeMu.Unlock()
	if err, done := modprobeErr[module]; done {
		return err
	}
	out, err := exec.Command("modprobe", module).CombinedOutput()
	if err != nil {
		err = errors.New(strings.TrimSpace(string(out)) + ": " + err.Error())
	}
	modprobeErr[module] = err
	return err
}
