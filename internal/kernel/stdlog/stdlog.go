// Package stdlog sends what libraries write through the standard library's
// global logger (package log) to klog. ipvsproxy itself never uses package
// log; github.com/vishvananda/netlink does, straight to stderr, for every
// netlink attribute it does not know.
package stdlog

import (
	"bytes"
	"log"
	"strings"
	"sync"

	"k8s.io/klog/v2"
)

// libraryVerbosity is the klog level of netlink's parse notices: they say
// the kernel is newer than the library (a hash set's IPSET_ATTR_BUCKETSIZE
// and IPSET_ATTR_INITVAL, two per set and listing), never that something
// went wrong for ipvsproxy, and a node with kube-proxy's sets printed
// thousands of them.
const libraryVerbosity = 4

var once sync.Once

// ToKlog routes the standard logger to klog, once per process: netlink's
// parse notices at libraryVerbosity, any other line (a library we do not
// know of) as an info line, so it is not lost.
func ToKlog() {
	once.Do(func() {
		log.SetFlags(0)
		log.SetPrefix("")
		log.SetOutput(klogWriter{})
	})
}

type klogWriter struct{}

func (klogWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		msg := string(line)
		if isNetlinkParseNotice(msg) {
			klog.V(libraryVerbosity).InfoS(msg, "library", "github.com/vishvananda/netlink")
		} else {
			klog.InfoS(msg, "logger", "standard library log")
		}
	}
	return len(p), nil
}

// isNetlinkParseNotice recognises vishvananda/netlink v1.3's log.Printf
// lines ("unknown ipset data attribute from kernel: ...", "attribute 0x.. has
// invalid length ...").
func isNetlinkParseNotice(msg string) bool {
	return strings.Contains(msg, "attribute from kernel") || strings.HasPrefix(msg, "attribute 0x")
}
