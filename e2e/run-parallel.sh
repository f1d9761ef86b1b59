#!/usr/bin/env bash
# run-parallel.sh — the end-to-end suite as two runs of e2e/run.sh at once, each its own control
# plane and VM with half of the scenarios; `make e2e` runs this. The VM is one emulated CPU and
# keeps one of the machine's two cores busy; one run after the other left the second core mostly
# idle while the suite became the longest stage of CI (about 25 minutes of a 45-minute budget).
#
#   first:  1-8 and 11-39 (the tutorial and the traffic corners), 46 and 70, then 9 (restart under
#           load: it restarts node1's daemon) and 10 (clean-up)
#   second: 40 and up but 46 and 70 (migration, kube-proxy compatibility, ownership, IPv6, lifecycle),
#           then 10
# 46 (resync shares, about 60 s) and 70 (the downgrade and upgrade, about 90 s) run in the first
# half to even them out: in the cold CI run of 2026-12-04 the first half's scenarios took 767 s
# and the second's 910 s.
#
# Each half prints its scenarios as e2e/run.sh does; the last line sums both: `N passed, N failed`.
# Exits 1 when either half failed. IPVSPROXY_E2E_SCENARIOS set: a single e2e/run.sh with those.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [[ -n ${IPVSPROXY_E2E_SCENARIOS:-} ]]; then
	exec "$here/run.sh" "$@"
fi

# The scenarios guest.sh would run by default: every scenario of e2e/suite (its binary's -list:
# VERDICT SCENARIO, a scenario named by its first verdict) but those it marks by-name (run when
# named only).
out=$(mktemp -d)
trap 'rm -rf -- "$out"' EXIT
go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
(cd "$here/suite" && CGO_ENABLED=0 "$go" test -c -tags e2e -trimpath -o "$out/e2e-suite.test" .) || exit 1
mapfile -t all < <("$out/e2e-suite.test" -list | awk '$1 == $2 && $3 != "by-name" { print $2 }' | sort -n)
((${#all[@]})) || { echo "e2e: e2e/suite lists no scenario" >&2; exit 1; }
first=() second=()
for n in "${all[@]}"; do
	case $n in
	9 | 10) ;;
	46 | 70) first+=("$n") ;;
	# A scenario's number may end in a letter (39a, 39b): its digits place it.
	*) if ((${n%%[!0-9]*} < 40)); then first+=("$n"); else second+=("$n"); fi ;;
	esac
done
first+=(9 10)
second+=(10)

start=$SECONDS
echo "e2e: two runs at once: [${first[*]}] and [${second[*]}]"
IPVSPROXY_E2E_SCENARIOS="${first[*]}" "$here/run.sh" "$@" >"$out/first.log" 2>&1 &
pid_first=$!
IPVSPROXY_E2E_SCENARIOS="${second[*]}" "$here/run.sh" "$@" >"$out/second.log" 2>&1 &
pid_second=$!
wait "$pid_first"
rc_first=$?
wait "$pid_second"
rc_second=$?

passed=0 failed=0
for half in first second; do
	echo "===== e2e, $half half"
	cat "$out/$half.log"
	summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out/$half.log" | tail -n1)
	if [[ -z $summary ]]; then
		echo "FAIL e2e $half half: no summary (see its output above)"
		summary="0 passed, 1 failed"
	fi
	read -r p _ f _ <<<"$summary"
	passed=$((passed + p)) failed=$((failed + f))
done
echo "e2e: both halves in $((SECONDS - start))s (first exit $rc_first, second exit $rc_second)"
echo "$passed passed, $failed failed"
((rc_first == 0 && rc_second == 0 && failed == 0))
