package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at build time by the Makefile (-ldflags "-X main.version=..."):
// version from the repository's VERSION file, the same string the image's
// labels, the Helm chart and the CHANGELOG carry; the git commit, its time
// (RFC 3339) and the tree state, "clean" or "dirty". Go's own VCS stamp
// (vcs.revision in the build information) is read when they are not set,
// but builds with -buildvcs=false have none.
var (
	version    = "dev"
	commit     = ""
	commitTime = ""
	treeState  = ""
)

// buildInfo is what `ipvsproxy version` prints and kubernetes_build_info
// reports, read from the binary itself: the commit Go stamped into it, and
// the Kubernetes release whose API client it was built against.
type buildInfo struct {
	Version    string
	Commit     string // "" when the build was not made in a git checkout
	CommitTime string // RFC 3339, "" with Commit
	Modified   bool   // the checkout differed from Commit
	GoVersion  string
	Platform   string
	// ClientGo is the version of k8s.io/client-go linked in (v0.36.3), and
	// Kubernetes the release it belongs to (v1.36.3): client-go's v0.X.Y is
	// cut from Kubernetes' v1.X.Y.
	ClientGo, Kubernetes string
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Commit: commit, CommitTime: commitTime, Modified: treeState == "dirty"}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	for _, s := range info.Settings {
		if commit != "" {
			break
		}
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.time":
			b.CommitTime = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	for _, m := range info.Deps {
		if m.Path != "k8s.io/client-go" {
			continue
		}
		if m.Replace != nil {
			m = m.Replace
		}
		b.ClientGo = m.Version
		b.Kubernetes = kubernetesRelease(m.Version)
	}
	return b
}

// kubernetesRelease maps a k8s.io staging module's version (v0.36.3) to the
// Kubernetes release it was published with (v1.36.3); "" for any other form.
func kubernetesRelease(staging string) string {
	rest, ok := strings.CutPrefix(staging, "v0.")
	if !ok || rest == "" {
		return ""
	}
	return "v1." + rest
}

// commitString is the commit with "-dirty" when the checkout was modified,
// or "unknown".
func (b buildInfo) commitString() string {
	switch {
	case b.Commit == "":
		return "unknown"
	case b.Modified:
		return b.Commit + "-dirty"
	}
	return b.Commit
}

// treeState is kubernetes_build_info's git_tree_state: "clean", "dirty", or
// "" without a commit.
func (b buildInfo) treeState() string {
	switch {
	case b.Commit == "":
		return ""
	case b.Modified:
		return "dirty"
	}
	return "clean"
}

func (b buildInfo) write(w io.Writer) {
	fmt.Fprintf(w, "ipvsproxy %s\n", b.Version)
	fmt.Fprintf(w, "commit:      %s\n", b.commitString())
	if b.CommitTime != "" {
		fmt.Fprintf(w, "commit time: %s\n", b.CommitTime)
	}
	fmt.Fprintf(w, "go:          %s %s\n", b.GoVersion, b.Platform)
	if b.Kubernetes != "" {
		fmt.Fprintf(w, "kubernetes:  %s (k8s.io/client-go %s)\n", b.Kubernetes, b.ClientGo)
	} else {
		fmt.Fprintf(w, "kubernetes:  unknown (no k8s.io/client-go in the build information)\n")
	}
}
