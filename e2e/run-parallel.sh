#!/usr/bin/env bash
# run-parallel.sh — the end-to-end suite as two runs of e2e/run.sh at once, each its own control
# plane and VM with half of the scenarios; `make e2e` runs this. The VM is one emulated CPU and
# keeps one of the machine's two cores busy; one run after the other left the second core mostly
# idle while the suite became the longest stage of CI (about 25 minutes of a 45-minute budget).
#
# The halves are balanced by the time each scenario took in the last recorded run
# (e2e/scenarios/durations.tsv): the longest first, each to the half with less time so far.
# restart-under-load (it restarts node1's daemon) ends the first half, cleanup-leaves-nothing
# both; within a half the scenarios keep the suite's default order. A scenario the table lacks
# counts as 30 s, and the run says so.
#
# Each half prints its scenarios as e2e/run.sh does; the last line sums both: `N passed, N failed`.
# Exits 1 when either half failed. IPVSPROXY_E2E_SCENARIOS set: a single e2e/run.sh with those.
# IPVSPROXY_E2E_RECORD_TIMES=1: when both halves passed, the times they printed replace the rows
# of durations.tsv, with this commit and the date.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
durations=$here/scenarios/durations.tsv
unmeasured=30

if [[ -n ${IPVSPROXY_E2E_SCENARIOS:-} ]]; then
	exec "$here/run.sh" "$@"
fi

# The scenarios guest.sh runs by default, in its order: every scenario of e2e/suite (its binary's
# -list: VERDICT SCENARIO, a scenario named by its first verdict) but those it marks by-name
# (run when named only).
out=$(mktemp -d)
trap 'rm -rf -- "$out"' EXIT
go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
(cd "$here/suite" && CGO_ENABLED=0 "$go" test -c -tags e2e -trimpath -o "$out/e2e-suite.test" .) || exit 1
mapfile -t all < <("$out/e2e-suite.test" -list | awk '$1 == $2 && $3 != "by-name" { print $2 }')
((${#all[@]})) || { echo "e2e: e2e/suite lists no scenario" >&2; exit 1; }

# half[NAME]: 1 or 2, the longest scenario first, each to the half with less time so far.
declare -A secs=() half=()
while IFS=$'\t' read -r name s _; do
	[[ $name == scenario || -z $name ]] || secs[$name]=$s
done <"$durations"
for n in "${all[@]}"; do
	[[ -n ${secs[$n]:-} ]] || { echo "e2e: $n has no time in e2e/scenarios/durations.tsv: counted as ${unmeasured}s"; secs[$n]=$unmeasured; }
done
load1=$((${secs[restart-under-load]} + ${secs[cleanup-leaves-nothing]})) load2=${secs[cleanup-leaves-nothing]}
while read -r s n; do
	if ((load1 <= load2)); then half[$n]=1 load1=$((load1 + s)); else half[$n]=2 load2=$((load2 + s)); fi
done < <(for n in "${all[@]}"; do
	[[ $n == restart-under-load || $n == cleanup-leaves-nothing ]] || echo "${secs[$n]} $n"
done | sort -k1,1nr -s)
first=() second=()
for n in "${all[@]}"; do
	case ${half[$n]:-} in
	1) first+=("$n") ;;
	2) second+=("$n") ;;
	esac
done
first+=(restart-under-load cleanup-leaves-nothing)
second+=(cleanup-leaves-nothing)

start=$SECONDS
echo "e2e: two runs at once, about ${load1}s and ${load2}s by e2e/scenarios/durations.tsv: [${first[*]}] and [${second[*]}]"
IPVSPROXY_E2E_SCENARIOS="${first[*]}" "$here/run.sh" "$@" >"$out/first.log" 2>&1 &
pid_first=$!
IPVSPROXY_E2E_SCENARIOS="${second[*]}" "$here/run.sh" "$@" >"$out/second.log" 2>&1 &
pid_second=$!
wait "$pid_first"
rc_first=$?
wait "$pid_second"
rc_second=$?

passed=0 failed=0
for h in first second; do
	echo "===== e2e, $h half"
	cat "$out/$h.log"
	summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out/$h.log" | tail -n1)
	if [[ -z $summary ]]; then
		echo "FAIL e2e-$h-half: no summary (see its output above)"
		summary="0 passed, 1 failed"
	fi
	read -r p _ f _ <<<"$summary"
	passed=$((passed + p)) failed=$((failed + f))
done
echo "e2e: both halves in $((SECONDS - start))s (first exit $rc_first, second exit $rc_second)"

# The times guest.sh printed, `    (NAME: Ns)`, the longer where a scenario ran in both halves.
if [[ -n ${IPVSPROXY_E2E_RECORD_TIMES:-} ]] && ((rc_first == 0 && rc_second == 0 && failed == 0)); then
	repo=$(cd "$here/.." && pwd)
	commit=$(git -C "$repo" rev-parse --short=12 HEAD)
	[[ -z $(git -C "$repo" status --porcelain --untracked-files=no) ]] || commit+=-dirty
	sed -nE 's/^    \(([a-z0-9-]+): ([0-9]+)s\)$/\1 \2/p' "$out/first.log" "$out/second.log" >"$out/times"
	{
		printf 'scenario\tseconds\tcommit\tdate\n'
		for n in "${all[@]}"; do
			s=$(awk -v n="$n" '$1 == n && $2 > max { max = $2 } END { print max + 0 }' "$out/times")
			printf '%s\t%s\t%s\t%s\n' "$n" "$s" "$commit" "$(date -u +%FT%TZ)"
		done
	} >"$out/durations.tsv"
	mv "$out/durations.tsv" "$durations"
	echo "e2e: the scenarios' times recorded in e2e/scenarios/durations.tsv"
fi
echo "$passed passed, $failed failed"
((rc_first == 0 && rc_second == 0 && failed == 0))
