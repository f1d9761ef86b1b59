package metrics

import (
	"runtime"
	"strings"
)

// SetBuildInfo sets kubernetes_build_info, which dashboards made for
// Kubernetes components read; version is ipvsproxy's ("v0.2.0", or a
// commit for a development build). major and minor are parsed from a
// vX.Y.Z version and empty otherwise.
func (m *Metrics) SetBuildInfo(version, commit string) {
	major, minor := "", ""
	if v, ok := strings.CutPrefix(version, "v"); ok {
		parts := strings.SplitN(v, ".", 3)
		if len(parts) >= 2 {
			major, minor = parts[0], parts[1]
		}
	}
	m.BuildInfo.WithLabelValues(major, minor, version, commit, "", "", runtime.Version(), runtime.Compiler, runtime.GOOS+"/"+runtime.GOARCH).Set(1)
}
