#!/usr/bin/env bash
# stages.sh — runs make targets one after another, as `make test`'s prerequisites did, and prints
# how long each took: CI has a time budget (45 minutes cold on 2 cores), and which stage grew must
# be visible in every run's output, not found by bisecting. Stops at the first failing stage.
#
# A stage written A+B runs the targets A and B at the same time: each of the VM stages boots one
# guest of one vCPU, so two of them use the host's two cores where one after the other leaves a
# core idle. Their outputs are kept apart (each to a file, printed whole when it ends, in the
# order written) and each target's own time is printed beside the group's.
#
# Usage: stages.sh STAGE...   (MAKE from the environment, default make)
set -uo pipefail
make=${MAKE:-make}
start=$SECONDS
times=()
summary() { echo "stages: ${times[*]}; total $((SECONDS - start))s"; }

# group runs the targets of one A+B stage at once; it fails when any does.
group() {
	local logs pids=() t=$SECONDS i rc=0 failed=() targets
	logs=$(mktemp -d /var/tmp/ipvsproxy-stages.XXXXXX)
	IFS=+ read -ra targets <<<"$1"
	for i in "${!targets[@]}"; do
		(
			t0=$SECONDS
			"$make" --no-print-directory "${targets[i]}" >"$logs/$i.log" 2>&1
			rc=$?
			echo "$((SECONDS - t0))" >"$logs/$i.time"
			exit "$rc"
		) &
		pids+=($!)
	done
	local parts=()
	for i in "${!targets[@]}"; do
		wait "${pids[i]}" || { rc=1; failed+=("${targets[i]}"); }
		echo "=== ${targets[i]} (run beside the others of $1) ==="
		cat "$logs/$i.log"
		parts+=("${targets[i]} $(<"$logs/$i.time")s")
	done
	rm -rf -- "$logs"
	local joined
	joined=$(printf '%s, ' "${parts[@]}")
	joined=${joined%, }
	if ((rc != 0)); then
		times+=("$1 FAILED (${failed[*]}) after $((SECONDS - t))s [$joined]")
		return 1
	fi
	times+=("$1 $((SECONDS - t))s [$joined]")
}

for stage in "$@"; do
	if [[ $stage == *+* ]]; then
		group "$stage" || { summary; exit 1; }
		continue
	fi
	t=$SECONDS
	if ! "$make" --no-print-directory "$stage"; then
		times+=("$stage FAILED after $((SECONDS - t))s")
		summary
		exit 1
	fi
	times+=("$stage $((SECONDS - t))s")
done
summary
