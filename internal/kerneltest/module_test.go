package kerneltest

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestModuleUnavailable(t *testing.T) {
	if os.Geteuid() != 0 {
		Skip(t, NotRoot, "the probe is asked only as root")
	}
	unsupported := errors.New("not in this kernel")
	probes := 0
	missing := Module{Name: "ipvsproxy-no-such-module", Reason: NoKernelFeature, Unsupported: unsupported,
		Probe: func(testing.TB) error { probes++; return unsupported }}
	reason, msg := missing.Unavailable(t)
	if reason != NoKernelFeature || !strings.Contains(msg, "modprobe ipvsproxy-no-such-module") || !strings.Contains(msg, "not in this kernel") {
		t.Errorf("missing module: %q, %q; want %q naming modprobe and the probe's error", reason, msg, NoKernelFeature)
	}
	if probes != 1 {
		t.Errorf("probed %d times, want once when modprobe fails", probes)
	}
	present := Module{Name: "ipvsproxy-no-such-module", Reason: NoKernelFeature, Unsupported: unsupported,
		Probe: func(testing.TB) error { return nil }}
	if reason, msg := present.Unavailable(t); reason != "" {
		t.Errorf("present module: %q, %q; want none", reason, msg)
	}
}
