#!/usr/bin/env bash
# test-in-vm.sh — compile Go test binaries on this machine and run them all, as root, inside ONE
# boot of the end-to-end VM (a kernel with IPVS and the dummy driver, which this host lacks).
#
#   e2e/vm/test-in-vm.sh [--smoke] [--run REGEX] [PKG...]
#
#   PKG          Go packages of the product, e.g. ./ipvs ./netif (compiled with `go test -c`)
#   --smoke      also run e2e/vm/smoke.sh: IPVS twos and a dummy interface work in the guest
#   --run REGEX  passed to every binary as -test.run
#   --bench REGEX  passed as -test.bench (with -test.benchmem); add --run '^$' for benchmarks only
#   -e NAME=VALUE  set in the guest's environment for the binaries (repeatable)
#
# Prints each binary's own -test.v output, then `N passed, N failed` over top-level tests (a
# binary that fails without a failing test, e.g. a panic, counts as one failure). Exits non-zero
# on any failure. Environment: as run.sh (IPVSPROXY_VM_TIMEOUT, IPVSPROXY_VM_MEM, ...).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${IPVSPROXY_E2E_CACHE:-/var/cache/ipvsproxy-e2e}
go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
smoke='' run_regex='' bench_regex=''
pkgs=() guest_env=()
while (($#)); do
	case $1 in
	--smoke) smoke=1; shift ;;
	--run) run_regex=$2; shift 2 ;;
	--bench) bench_regex=$2; shift 2 ;;
	-e) guest_env+=(-e "$2"); shift 2 ;;
	-*) echo "test-in-vm: unknown option $1" >&2; exit 2 ;;
	*) pkgs+=("$1"); shift ;;
	esac
done
((${#pkgs[@]})) || [[ -n $smoke ]] || { echo "test-in-vm: no packages (and no --smoke)" >&2; exit 2; }

start=$SECONDS
"$here/prepare.sh"

# Binaries live under the cache, not /tmp: the guest mounts its own /tmp, and the host root is
# what it sees everywhere else.
mkdir -p "$cache/runs"
work=$(mktemp -d "$cache/runs/test.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/results"

# plan holds one line per binary: NAME BINARY SOURCE_DIR (the test runs in its package directory,
# as under go test).
: >"$work/plan"
cd "$repo"
for pkg in "${pkgs[@]}"; do
	dir=$(cd "$repo" && "$go" list -f '{{.Dir}}' "$pkg")
	name=$("$go" list -f '{{.ImportPath}}' "$pkg")
	bin=$work/bin/$(echo "$name" | tr '/' '_').test
	echo "test-in-vm: go test -c $pkg"
	"$go" test -c -o "$bin" "$pkg"
	if [[ ! -x $bin ]]; then
		echo "test-in-vm: $pkg has no test files; skipped"
		continue
	fi
	echo "$name $bin $dir" >>"$work/plan"
done
if [[ -n $smoke ]]; then
	echo "smoke $here/smoke.sh $repo" >>"$work/plan"
fi
compiled=$SECONDS

set +e
IPVSPROXY_VM_PREPARED=1 "$here/run.sh" --results "$work/results" -e "TEST_RUN=$run_regex" -e "TEST_BENCH=$bench_regex" "${guest_env[@]}" -- \
	"$here/test-guest.sh" "$work/plan" "$work/results"
rc=$?
set -e
echo "test-in-vm: compile $((compiled - start))s, VM $((SECONDS - compiled))s, total $((SECONDS - start))s"
if [[ ! -f $work/results/summary ]]; then
	echo "test-in-vm: the VM produced no summary (run.sh exit $rc)"
	echo "0 passed, 1 failed"
	exit 1
fi
exit "$rc"
