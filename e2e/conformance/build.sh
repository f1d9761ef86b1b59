#!/usr/bin/env bash
# Builds what the conformance cluster runs, once per machine, into a cache dir keyed like
# e2e/controlplane/build.sh: kubelet, kube-controller-manager, kube-scheduler, agnhost,
# regression-issue-74839 and
# e2e.test from k8s.io/kubernetes (the version this module's go.mod requires), this module's pause and
# mkimage, the ginkgo CLI, and containerd (its own Go module, a fixed version; Debian bookworm's 1.6 is too old
# for the kubelet, see docs/testing.md). Heavy builds run under nice; each step's time goes
# to stderr and to $bin/build-times.txt the first time it runs (cold).
#
# Usage: build.sh            prints the directory holding the binaries on stdout
# Env:   IPVSPROXY_E2E_BIN_CACHE  cache root (default /var/cache/ipvsproxy-e2e/bin)
#        GO                       go command (default: go on PATH, else /usr/local/go/bin/go)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_root=${IPVSPROXY_E2E_BIN_CACHE:-/var/cache/ipvsproxy-e2e/bin}
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
nice=(nice -n 15)

# The Kubernetes release go.mod requires, so that a version is changed in one place.
k8s_version=$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "$here/go.mod")
k8s_minor=${k8s_version#v1.}
k8s_minor=${k8s_minor%%.*}
containerd_version=v2.4.2
ldflags="-s -w"
for kv in gitVersion=$k8s_version gitMajor=1 gitMinor=$k8s_minor gitTreeState=clean; do
	ldflags+=" -X k8s.io/component-base/version.$kv"
done

key=$(cat "$here/go.mod" "$here/go.sum" "$here/suite/suite_test.go" \
	<(echo "$ldflags $containerd_version") <("$GO" version) | sha256sum | cut -c1-16)
bin=$cache_root/conformance-$key
mkdir -p "$bin"

log() { echo "build.sh: $*" >&2; }

cd "$here"
exec 9>"$bin/.lock"
flock 9

# step NAME OUTPUT... -- CMD...: runs CMD (which writes into $tmp) unless every OUTPUT is cached.
step() {
	local name=$1 outs=() o missing=
	shift
	while [[ $1 != -- ]]; do outs+=("$1"); shift; done
	shift
	for o in "${outs[@]}"; do [[ -x $bin/$o ]] || missing=1; done
	if [[ -z $missing ]]; then
		log "$name cached"
		return
	fi
	log "building $name"
	local start=$SECONDS
	tmp=$(mktemp -d "$bin/.build.XXXXXX")
	"$@"
	for o in "${outs[@]}"; do mv "$tmp/$o" "$bin/$o"; done
	rmdir "$tmp"
	log "built $name in $((SECONDS - start))s"
	echo "$name $((SECONDS - start))s $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$bin/build-times.txt"
}

k8s_build() { CGO_ENABLED=0 "${nice[@]}" "$GO" build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$tmp/" "$@"; }

step kubelet kubelet -- k8s_build k8s.io/kubernetes/cmd/kubelet
step kubectl kubectl -- k8s_build k8s.io/kubernetes/cmd/kubectl
step kube-controller-manager kube-controller-manager -- k8s_build k8s.io/kubernetes/cmd/kube-controller-manager
step kube-scheduler kube-scheduler -- k8s_build k8s.io/kubernetes/cmd/kube-scheduler
step agnhost agnhost -- k8s_build k8s.io/kubernetes/test/images/agnhost
step regression-issue-74839 regression-issue-74839 -- k8s_build k8s.io/kubernetes/test/images/regression-issue-74839
step e2e.test e2e.test -- eval 'CGO_ENABLED=0 "${nice[@]}" "$GO" test -c -vet=off -trimpath -buildvcs=false -ldflags "$ldflags" -o "$tmp/e2e.test" ./suite'
# containerd from its own module graph (go install pkg@version ignores this go.mod); static,
# without the btrfs and devmapper snapshotters, which need cgo and are not used here.
containerd_build() {
	GOBIN=$tmp CGO_ENABLED=0 GOFLAGS=-tags=no_btrfs,no_devmapper,no_zfs "${nice[@]}" "$GO" install -trimpath \
		"github.com/containerd/containerd/v2/cmd/containerd@$containerd_version" \
		"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$containerd_version" \
		"github.com/containerd/containerd/v2/cmd/ctr@$containerd_version"
}
step "containerd $containerd_version" containerd containerd-shim-runc-v2 ctr -- containerd_build
# The ginkgo CLI runs e2e.test's specs in parallel processes (the full run); the version is the
# one k8s.io/kubernetes links, so the CLI and the compiled suite speak the same protocol.
ginkgo_version=$(awk '$1 == "github.com/onsi/ginkgo/v2" { print $2 }' go.mod)
ginkgo_build() { GOBIN=$tmp CGO_ENABLED=0 "${nice[@]}" "$GO" install -trimpath "github.com/onsi/ginkgo/v2/ginkgo@$ginkgo_version"; }
step "ginkgo $ginkgo_version" ginkgo -- ginkgo_build
# This module's small tools change with the scripts: rebuilt every time (seconds).
CGO_ENABLED=0 "$GO" build -trimpath -buildvcs=false -o "$bin/" ./cmd/pause ./cmd/mkimage ./cmd/junitsummary ./cmd/clusterdns ./cmd/conformanceledger
echo "$bin"
