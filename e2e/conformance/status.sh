#!/usr/bin/env bash
# status.sh — `make conformance-status`: from ledger.tsv, per spec its latest result and commit;
# the selected specs with no result at the current minor version; the failures with no cause
# noted after them (docs/conformance.md). The selected specs come from a dry run of e2e.test
# (build.sh's cache: seconds when warm, the conformance build when cold).
#
# The current minor version: the newest tag vX.Y.Z reachable from HEAD names it vX.Y, and a
# result counts when its commit is vX.Y.0 (or, lacking that tag, vX.Y.Z) or after it in HEAD's
# history. With no version tag (the project has none yet, its CHANGELOG only "Unreleased") every
# commit of HEAD's history counts. SINCE=<rev> overrides: results at <rev> or after it.
# Env: CONF_CLUSTER (ipv4, dual-stack or kube-proxy-ipvs; ipv4), SINCE.
# Args: passed to `conformanceledger status` (-not-passed: only the selected specs not passed).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
export PATH=/usr/local/go/bin:$PATH
source "$here/selection.sh"
bin=$("$here/build.sh")
tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT

cluster=${CONF_CLUSTER:-ipv4}
select_cluster "$cluster"
dry_run_specs "$bin" "$tmp" "$selection_focus" "$selection_skip" >"$tmp/selected.txt"

since=${SINCE:-}
if [[ -n $since ]]; then
	version="the commits since $since"
elif tag=$(git -C "$repo" describe --tags --abbrev=0 --match 'v[0-9]*.[0-9]*.[0-9]*' 2>/dev/null); then
	minor=${tag%.*}
	since=$tag
	git -C "$repo" rev-parse -q --verify "refs/tags/$minor.0" >/dev/null && since=$minor.0
	version="$minor (since $since)"
fi
if [[ -n $since ]]; then
	{ git -C "$repo" rev-parse "$since^{commit}"; git -C "$repo" rev-list "$since..HEAD"; } >"$tmp/commits.txt"
else
	version="the unreleased version (no version tag: all of HEAD's history)"
	git -C "$repo" rev-list HEAD >"$tmp/commits.txt"
fi
"$bin/conformanceledger" status -ledger "$here/ledger.tsv" -cluster "$cluster" \
	-selected "$tmp/selected.txt" -commits "$tmp/commits.txt" -version "$version" "$@"
