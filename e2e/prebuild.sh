#!/usr/bin/env bash
# prebuild.sh — starts the builds of the control plane (kube-apiserver, etcd), of the previous
# release's ipvsproxy (the upgrade scenario's), of the conformance cluster (kubelet,
# kube-controller-manager, kube-scheduler, e2e.test, containerd) and of the image's arm64 daemon in
# the background, under nice 19, and returns at once. On a new machine these builds are most of a
# cold `make test`; started first, they use the CPU that the tests leave idle (the VM tests and the
# end-to-end suite keep about one of the two cores busy) instead of waiting for their turn at the
# end. Both build scripts lock their cache directories, so when `make e2e` or the conformance smoke
# needs a binary, it waits for the build in flight or finds it cached; a failed background build
# is simply done again in the foreground. With warm caches this costs seconds. The background
# builds log to $IPVSPROXY_E2E_BIN_CACHE/prebuild.log, which e2e/fresh-check.sh prints at its end.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_root=${IPVSPROXY_E2E_BIN_CACHE:-/var/cache/ipvsproxy-e2e/bin}
mkdir -p "$cache_root"
log=$cache_root/prebuild.log
# Each line of the log carries the seconds since the start, to show when a cold run's builds end.
(
	start=$SECONDS
	{
		# The image's linux/arm64 daemon: a cross-compile of the whole dependency graph for
		# another architecture, which make image (the unit stage's reproducibility test, the first to need it) then
		# finds in the Go cache. Its output is not kept: only the cache matters.
		(cd "$here/.." && CGO_ENABLED=0 GOOS=linux GOARCH=arm64 nice -n 19 "${GO:-$(command -v go || echo /usr/local/go/bin/go)}" \
			build -trimpath -tags urfave_cli_no_docs -o /dev/null ./cmd/ipvsproxy)
		nice -n 19 "$here/controlplane/build.sh" >/dev/null
		nice -n 19 "$here/previous-build.sh" >/dev/null || true # e2e/run.sh says why, if it must
		nice -n 19 "$here/conformance/build.sh" >/dev/null
	} 2>&1 | while IFS= read -r line; do printf '+%ds %s\n' $((SECONDS - start)) "$line"; done
) >"$log" 2>&1 </dev/null &
echo "prebuild: control plane, previous release and conformance binaries building in the background under nice 19 (pid $!, log $log)"
