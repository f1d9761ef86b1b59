package ipvs

import (
	"io"
	"sync"

	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
)

// moby/ipvs runs `modprobe -va ip_vs` once per process and logs its failure
// through logrus, straight to stderr. Whether IPVS is there is decided by
// ipvsFamily; the DaemonSet has no /lib/modules, so that modprobe fails on
// every start and `ipvsproxy inspect` printed a warning on every call. The
// library's messages go to klog instead: errors as errors, the rest at V(2).
var routeLogrusOnce sync.Once

func routeLogrusToKlog() {
	routeLogrusOnce.Do(func() {
		logrus.SetOutput(io.Discard)
		logrus.AddHook(klogHook{})
	})
}

type klogHook struct{}

func (klogHook) Levels() []logrus.Level { return logrus.AllLevels }

func (klogHook) Fire(e *logrus.Entry) error {
	if e.Level <= logrus.ErrorLevel {
		klog.ErrorS(nil, e.Message, "library", "github.com/moby/ipvs")
	} else {
		klog.V(2).InfoS(e.Message, "library", "github.com/moby/ipvs", "level", e.Level.String())
	}
	return nil
}
