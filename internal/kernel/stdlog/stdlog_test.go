package stdlog

import (
	"bytes"
	"log"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// After ToKlog, netlink's parse notices are klog lines at
// libraryVerbosity (dropped at the default verbosity), and any other
// standard-logger line is an info line of klog's, not lost.
func TestToKlogRoutesTheStandardLogger(t *testing.T) {
	var buf bytes.Buffer
	klog.LogToStderr(false)
	klog.SetOutput(&buf)
	t.Cleanup(func() { klog.SetOutput(nil); klog.LogToStderr(true) })
	ToKlog()
	log.Printf("unknown ipset data attribute from kernel: {Type:21 Value:[12]} 21")
	log.Printf("attribute 0x%02x has invalid length of %d bytes", 3, 2)
	log.Printf("something else entirely")
	klog.Flush()
	got := buf.String()
	if strings.Contains(got, "from kernel") || strings.Contains(got, "invalid length") {
		t.Errorf("netlink's notices logged at the default verbosity:\n%s", got)
	}
	if !strings.Contains(got, `"something else entirely" logger="standard library log"`) {
		t.Errorf("another library's line was lost:\n%q", got)
	}
}
