package metrics

import (
	"runtime"
	"strings"
)

// SetBuildInfo sets kubernetes_build_info, which dashboards made for
// Kubernetes components read: version is ipvsproxy's ("0.1.0", "v0.1.0" or
// "0.1.0-rc.1"), commit the git commit it was built from, treeState "clean"
// or "dirty" (empty when unknown), buildDate the commit's time. major and
// minor are parsed from an X.Y.Z version and empty otherwise; git_version
// carries the "v" Kubernetes components report.
func (m *Metrics) SetBuildInfo(version, commit, treeState, buildDate string) {
	major, minor := "", ""
	v := strings.TrimPrefix(version, "v")
	if parts := strings.SplitN(v, ".", 3); len(parts) == 3 && isNumber(parts[0]) && isNumber(parts[1]) {
		major, minor = parts[0], parts[1]
	}
	gitVersion := version
	if major != "" {
		gitVersion = "v" + v
	}
	m.BuildInfo.WithLabelValues(major, minor, gitVersion, commit, treeState, buildDate, runtime.Version(), runtime.Compiler, runtime.GOOS+"/"+runtime.GOARCH).Set(1)
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
