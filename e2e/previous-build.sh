#!/usr/bin/env bash
# previous-build.sh — builds ipvsproxy at the previous release's commit (e2e/previous-release.env)
# from this repository's history, as `make build` builds it, and prints the binary's path. Cached
# by commit under $IPVSPROXY_E2E_BIN_CACHE (default /var/cache/ipvsproxy-e2e/bin): the first
# build compiles that commit's module graph (minutes cold), later ones print the path at once.
# The upgrade scenario (70) runs it on a node under live traffic, then this checkout's build.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cache_root=${IPVSPROXY_E2E_BIN_CACHE:-/var/cache/ipvsproxy-e2e/bin}
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
# shellcheck source=previous-release.env
. "$here/previous-release.env"

out=$cache_root/ipvsproxy-$PREVIOUS_COMMIT
mkdir -p "$cache_root"
# The two halves of `make e2e` ask at once: one builds, the other waits for it.
exec 9>"$cache_root/.previous.lock"
flock 9
if [[ -f $out && -x $out ]]; then
	echo "$out"
	exit 0
fi
git -C "$repo" cat-file -e "$PREVIOUS_COMMIT^{commit}" 2>/dev/null || {
	echo "previous-build.sh: commit $PREVIOUS_COMMIT ($PREVIOUS_VERSION) is not in this clone's history (a shallow clone?): fetch it, or run without the upgrade scenario" >&2
	exit 1
}
src=$(mktemp -d "$cache_root/.previous.XXXXXX")
trap 'rm -rf -- "$src"' EXIT
git -C "$repo" archive "$PREVIOUS_COMMIT" | tar -x -C "$src"
start=$SECONDS
# The build line of that commit's Makefile: static, trimmed, without urfave/cli's docs.
(cd "$src" && CGO_ENABLED=0 nice -n 10 "$GO" build -trimpath -tags urfave_cli_no_docs \
	-ldflags "-s -w -X main.version=v$PREVIOUS_VERSION-${PREVIOUS_COMMIT:0:7}" -o "$src/ipvsproxy.bin" ./cmd/ipvsproxy)
mv "$src/ipvsproxy.bin" "$out"
echo "previous-build.sh: built $PREVIOUS_VERSION ($PREVIOUS_COMMIT) in $((SECONDS - start))s" >&2
echo "$out"
