package ipvs

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
)

// TestLogrusGoesToKlog: what moby/ipvs logs through logrus (its failed
// modprobe) reaches klog, a warning only at V(2), and never stderr directly.
func TestLogrusGoesToKlog(t *testing.T) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	var out bytes.Buffer
	if err := fs.Parse([]string{"-logtostderr=false", "-alsologtostderr=false", "-stderrthreshold=FATAL", "-v=1"}); err != nil {
		t.Fatal(err)
	}
	klog.SetOutput(&out)
	t.Cleanup(func() {
		_ = fs.Set("v", "0")
		_ = fs.Set("logtostderr", "true")
		klog.SetOutput(os.Stderr)
	})

	routeLogrusToKlog()
	if logrus.StandardLogger().Out == os.Stderr {
		t.Fatal("logrus still writes to stderr")
	}
	logrus.Warnf("Running modprobe ip_vs failed with message: `%s`", "not found")
	klog.Flush()
	if out.Len() != 0 {
		t.Fatalf("a warning at -v=1 was logged: %q", out.String())
	}
	_ = fs.Set("v", "2")
	logrus.Warnf("Running modprobe ip_vs failed with message: `%s`", "not found")
	logrus.Error("Could not get ipvs family information from the kernel")
	klog.Flush()
	got := out.String()
	for _, want := range []string{"Running modprobe ip_vs failed", `level="warning"`, "Could not get ipvs family", `library="github.com/moby/ipvs"`} {
		if !strings.Contains(got, want) {
			t.Errorf("klog output lacks %q:\n%s", want, got)
		}
	}
	for _, line := range strings.Split(got, "\n") {
		if strings.Contains(line, "Could not get ipvs family") && !strings.HasPrefix(line, "E") {
			t.Errorf("the logrus error is not a klog error line: %q", line)
		}
	}
}
