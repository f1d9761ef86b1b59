#!/usr/bin/env bash
# stages.sh — runs make targets one after another, as `make test`'s prerequisites did, and prints
# how long each took: CI has a time budget (45 minutes cold on 2 cores), and which stage grew must
# be visible in every run's output, not found by bisecting. Stops at the first failing stage.
#
# Usage: stages.sh TARGET...   (MAKE from the environment, default make)
set -uo pipefail
make=${MAKE:-make}
start=$SECONDS
times=()
summary() { echo "stages: ${times[*]}; total $((SECONDS - start))s"; }
for target in "$@"; do
	t=$SECONDS
	if ! "$make" --no-print-directory "$target"; then
		times+=("$target FAILED after $((SECONDS - t))s")
		summary
		exit 1
	fi
	times+=("$target $((SECONDS - t))s")
done
summary
