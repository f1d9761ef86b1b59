#!/usr/bin/env bash
# test-in-vm.sh — compile Go test binaries on this machine and run them all, as root, inside ONE
# boot of the end-to-end VM (a kernel with IPVS and the dummy driver, which this host lacks).
#
#   e2e/vm/test-in-vm.sh [--smoke] [--run REGEX] [PKG...]
#
#   PKG          Go packages of the product, e.g. ./internal/kernel/ipvs ./internal/kernel/netif (compiled with `go test -c`)
#   --smoke      also run e2e/vm/smoke.sh: IPVS twos and a dummy interface work in the guest
#   --run REGEX  passed to every binary as -test.run
#   --bench REGEX  passed as -test.bench (with -test.benchmem); add --run '^$' for benchmarks only
#   --benchtime T  passed as -test.benchtime (e.g. 5x: a benchmark whose operation takes seconds)
#   -e NAME=VALUE  set in the guest's environment for the binaries (repeatable)
#   --self-test-panic once|always  (self-test of this script only) the guest kernel panics on
#                  purpose, on the first boot only or on every boot; see e2e/vm/panic-selftest.sh
#
# Prints each binary's own -test.v output, then `N passed, N failed` over top-level tests (a
# binary that fails without a failing test, e.g. a panic, counts as one failure). Exits non-zero
# on any failure. Environment: as run.sh (IPVSPROXY_VM_TIMEOUT, IPVSPROXY_VM_MEM, IPVSPROXY_VM_CPU,
# ...).
#
# A guest kernel panic is named as such, with the oops' first lines and the binary it hit. The VM
# stage is then booted again, at most IPVSPROXY_VM_PANIC_RETRIES times (default 1); every panic is
# printed and counted, and a stage whose last boot panicked fails.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${IPVSPROXY_E2E_CACHE:-/var/cache/ipvsproxy-e2e}
go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
smoke='' run_regex='' bench_regex='' bench_time='' self_test_panic=''
panic_retries=${IPVSPROXY_VM_PANIC_RETRIES:-1}
pkgs=() guest_env=()
while (($#)); do
	case $1 in
	--smoke) smoke=1; shift ;;
	--run) run_regex=$2; shift 2 ;;
	--bench) bench_regex=$2; shift 2 ;;
	--benchtime) bench_time=$2; shift 2 ;;
	-e) guest_env+=(-e "$2"); shift 2 ;;
	--self-test-panic) self_test_panic=$2; shift 2 ;;
	-*) echo "test-in-vm: unknown option $1" >&2; exit 2 ;;
	*) pkgs+=("$1"); shift ;;
	esac
done
[[ $self_test_panic =~ ^(|once|always)$ ]] || { echo "test-in-vm: --self-test-panic wants once or always" >&2; exit 2; }
((${#pkgs[@]})) || [[ -n $smoke$self_test_panic ]] || { echo "test-in-vm: no packages (and no --smoke)" >&2; exit 2; }

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
if [[ -n $self_test_panic ]]; then
	# Runs in the results share, where it leaves a mark so that "once" panics on one boot only.
	echo "panic-self-test-$self_test_panic $here/crash-guest.sh $work/results" >>"$work/plan"
fi
compiled=$SECONDS

boots=0 panics=0
while :; do
	boots=$((boots + 1))
	set +e
	IPVSPROXY_VM_PREPARED=1 "$here/run.sh" --results "$work/results" -e "TEST_RUN=$run_regex" -e "TEST_BENCH=$bench_regex" -e "TEST_BENCHTIME=$bench_time" \
		-e "PANIC_SELF_TEST=$self_test_panic" "${guest_env[@]}" -- "$here/test-guest.sh" "$work/plan" "$work/results"
	rc=$?
	set -e
	[[ -f $work/results/guest-panic ]] || break
	panics=$((panics + 1))
	# What and where: the kernel's first report line (and its panic line if another), the last
	# binary and test the guest started before it.
	reason=$(sed -E 's/^\[ *[0-9.]+\] //' "$work/results/guest-panic" | awk 'NR == 1 { r = $0 } /^Kernel panic/ && NR > 1 { r = r "; " $0 } END { print r }')
	where=$(tr -d '\r' <"$work/results/console.log" | grep -oE '^=== (binary [^ ]+|RUN +[^ ]+)' | tail -n2 | sed -E 's/^=== //; s/ +/ /g' | paste -sd' ' || true)
	echo "test-in-vm: guest kernel panic on boot $boots (panics so far: $panics; in: ${where:-before any binary}): $reason"
	((panics <= panic_retries)) || break
	echo "test-in-vm: booting the VM stage again (retry $panics of at most $panic_retries) after a guest kernel panic"
done
echo "test-in-vm: compile $((compiled - start))s, VM $((SECONDS - compiled))s, total $((SECONDS - start))s, boots $boots, guest kernel panics $panics"
if [[ -f $work/results/guest-panic ]]; then
	echo "test-in-vm: FAIL: guest kernel panic: $reason; first lines of the oops:"
	sed 's/^/test-in-vm:   /' "$work/results/guest-panic"
	echo "0 passed, 1 failed"
	exit 1
fi
if [[ ! -f $work/results/summary ]]; then
	echo "test-in-vm: the VM produced no summary and no kernel panic was seen (run.sh exit $rc; see its message above)"
	echo "0 passed, 1 failed"
	exit 1
fi
exit "$rc"
