#!/usr/bin/env bash
# fresh-check.sh — what a newcomer's first `make test` meets: a clean clone of HEAD, run with
# every cache empty (VM kernel and initramfs, kube-apiserver/etcd binaries, Go build and module
# caches, rootfs .debs). Only a cold run exercises the download and build paths, so only it can
# catch a step that a warm cache hides. Prints the wall time; exit status is make's.
#
#   e2e/fresh-check.sh [MAKE_TARGET]   default target: test
# Needs root, as `make test` does. Uses /var/tmp (the VM shares the host's / but keeps its own
# /tmp), removed on exit unless IPVSPROXY_FRESH_KEEP=1.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
target=${1:-test}
say() { printf 'fresh-check: %s\n' "$*" >&2; }
[[ $(id -u) == 0 ]] || { say "error: run as root (make test needs it)"; exit 1; }

root=$(mktemp -d /var/tmp/ipvsproxy-fresh.XXXXXX)
cleanup() {
	local rc=$?
	if [[ -n ${IPVSPROXY_FRESH_KEEP:-} ]]; then
		say "kept $root"
	else
		# The module cache is read-only by default; -modcacherw below makes it removable.
		rm -rf -- "$root"
	fi
	exit "$rc"
}
trap cleanup EXIT

git clone --quiet --no-hardlinks "$repo" "$root/src"
say "clean clone of $(git -C "$root/src" rev-parse --short HEAD) in $root/src; every cache under $root is empty"

export IPVSPROXY_E2E_CACHE=$root/e2e-cache
export IPVSPROXY_E2E_BIN_CACHE=$root/bin-cache
export IPVSPROXY_DEB_CACHE=$root/deb-cache
export GOCACHE=$root/gocache GOMODCACHE=$root/gomodcache
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-modcacherw"
export PATH=/usr/local/go/bin:$PATH

start=$SECONDS
rc=0
make -C "$root/src" "$target" || rc=$?
elapsed=$((SECONDS - start))
# When the background builds (e2e/prebuild.sh) ended: the stages wait for them on a cold run.
# (The module downloads, a hundred lines, are left out.)
[[ -f $IPVSPROXY_E2E_BIN_CACHE/prebuild.log ]] && grep -v 'go: downloading' "$IPVSPROXY_E2E_BIN_CACHE/prebuild.log" | sed 's/^/fresh-check: prebuild: /' >&2 || true
say "make $target with empty caches: exit $rc after ${elapsed}s ($((elapsed / 60))m$((elapsed % 60))s) on $(nproc) cores"
exit "$rc"
