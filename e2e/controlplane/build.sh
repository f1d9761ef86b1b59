#!/usr/bin/env bash
# Builds the end-to-end control plane: kube-apiserver and etcd from their Go
# modules (heavy: minutes cold), cached by a hash of go.mod and go.sum so a
# rerun on the same machine skips them; and this module's small tools (e2ectl),
# rebuilt every time because they change with the tests.
#
# Usage: build.sh            prints the directory holding the binaries on stdout
# Env:   IPVSPROXY_E2E_BIN_CACHE  cache root (default /var/cache/ipvsproxy-e2e/bin)
#        IPVSPROXY_E2E_K8S        an older minor of the Kubernetes matrix (1.35, 1.36): its
#                                 kube-apiserver, etcd and kube-proxy from k8s/MINOR/go.mod
#                                 (k8s/module.sh) instead of this module's; e2ectl stays this one's
#        GO                       go command (default: go on PATH, else /usr/local/go/bin/go)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_root=${IPVSPROXY_E2E_BIN_CACHE:-/var/cache/ipvsproxy-e2e/bin}
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}

# The module graph the server binaries come from: this module's, or an older minor's.
gomod=$here/go.mod
servers=(kube-apiserver etcd kube-proxy)
if [[ -n ${IPVSPROXY_E2E_K8S:-} ]]; then
	gomod=$here/k8s/$IPVSPROXY_E2E_K8S/go.mod
	if [[ ! -f $gomod ]]; then
		echo "build.sh: IPVSPROXY_E2E_K8S=$IPVSPROXY_E2E_K8S: no $gomod (the newest minor is this module's own; older ones: k8s/module.sh)" >&2
		exit 2
	fi
fi

# The version the apiserver reports (/version, and what clients negotiate with): the release
# go.mod requires, so that a version is changed in one place.
k8s_version=$(awk '$1 == "k8s.io/kubernetes" || $1 == "require" && $2 == "k8s.io/kubernetes" { print $NF }' "$gomod")
k8s_minor=${k8s_version#v1.}
k8s_minor=${k8s_minor%%.*}
ldflags="-s -w"
for kv in gitVersion=$k8s_version gitMajor=1 gitMinor=$k8s_minor gitTreeState=clean; do
	ldflags+=" -X k8s.io/component-base/version.$kv"
done

# Static (CGO_ENABLED=0), as Kubernetes releases these binaries and as the conformance cluster's
# binaries are built (e2e/conformance/build.sh): with the same settings and module versions (keep
# go.mod's in step with that module's), the two builds share the compiled packages of
# Kubernetes, which a cold `make test` would otherwise compile twice (with and without cgo).
# Everything that decides the heavy binaries' content goes into the key.
key=$(cat "$gomod" "${gomod%.mod}.sum" "$here/cmd/kube-apiserver/main.go" "$here/cmd/etcd/main.go" "$here/cmd/kube-proxy/main.go" \
	<(echo "$ldflags CGO_ENABLED=0") <("$GO" version) | sha256sum | cut -c1-16)
bin=$cache_root/$key
mkdir -p "$bin"

log() { echo "build.sh: $*" >&2; }

cd "$here"
# Concurrent runs on one machine build once: the second waits for the first's binaries.
exec 9>"$bin/.lock"
flock 9
cached=1
for b in "${servers[@]}"; do [[ -x $bin/$b ]] || cached=; done
if [[ -n $cached ]]; then
	log "${servers[*]} $k8s_version cached in $bin"
else
	log "building ${servers[*]} $k8s_version into $bin (cold: several minutes)"
	start=$(date +%s)
	# Build into a temporary dir and move in, so an interrupted build never
	# leaves a half-written binary that the cache check would accept.
	tmp=$(mktemp -d "$bin/.build.XXXXXX")
	src=$here
	if [[ $gomod != "$here/go.mod" ]]; then
		# An older minor: the same programs in a module of that release's graph.
		src=$tmp/src
		for b in "${servers[@]}"; do mkdir -p "$src/cmd/$b" && cp "$here/cmd/$b/main.go" "$src/cmd/$b/"; done
		cp "$gomod" "${gomod%.mod}.sum" "$src/"
	fi
	(cd "$src" && CGO_ENABLED=0 "$GO" build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$tmp/" ./cmd/kube-apiserver ./cmd/etcd ./cmd/kube-proxy)
	for b in "${servers[@]}"; do mv "$tmp/$b" "$bin/"; done
	rm -rf "$tmp"
	log "built ${servers[*]} in $(( $(date +%s) - start ))s"
fi

start=$(date +%s)
# Static, so scenario scripts can run it in any guest root file system.
CGO_ENABLED=0 "$GO" build -trimpath -buildvcs=false -o "$bin/" ./cmd/e2ectl
log "built e2ectl in $(( $(date +%s) - start ))s"
echo "$bin"
