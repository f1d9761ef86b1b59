#!/usr/bin/env bash
# check.sh — `make release-check`, the release gate: at this commit (a clean tree; the ledger
# aside), everything below passed. It takes hours under emulation; it is not part of `make test`.
#   1. Conformance: every spec of the selection passed, recorded in e2e/conformance/ledger.tsv at
#      this commit: on the IPv4 cluster the 91 specs (two nodes, then the three-zone Traffic
#      Distribution specs on six nodes: three zones of two), on the dual-stack cluster its 22.
#      A cluster whose specs have not all passed at this commit is run (appending to the ledger),
#      then asked again; commit the ledger afterwards.
#   2. The end-to-end suite on both kernels the project supports, as the kernel matrix runs it
#      (make kernel-matrix, its e2e stage), on Debian 12's default 6.1 and on 6.12; the rows land
#      in e2e/matrix/kernels.tsv.
#   3. make fresh-check: make test from a clean clone with every cache empty.
# Each step prints PASS or FAIL; the last line is `N passed, N failed`. Every VM-booting command
# runs through IPVSPROXY_VM_WRAP when it is set: a command that takes the VM run as its
# arguments, such as a lock that keeps a shared machine at one VM run at a time.
#
# usage: release/check.sh [--only conformance|e2e|fresh]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
export PATH=/usr/local/go/bin:$PATH
only=
case ${1:-} in
--only) only=$2 ;;
"") ;;
*) echo "usage: release/check.sh [--only conformance|e2e|fresh]" >&2; exit 2 ;;
esac
cd "$repo"
say() { echo "release-check: $*" >&2; }
vm() { if [[ -n ${IPVSPROXY_VM_WRAP:-} ]]; then $IPVSPROXY_VM_WRAP "$@"; else "$@"; fi; }

git diff --quiet HEAD -- . ':!e2e/conformance/ledger.tsv' && [[ -z $(git status --porcelain --untracked-files=normal -- . ':!e2e/conformance/ledger.tsv') ]] ||
	{ say "the tree differs from HEAD (git status): the gate speaks for a commit"; exit 2; }
commit=$(git rev-parse HEAD)
version=$(cat VERSION)
say "release gate for $version at $commit"
passed=0 failed=0
result() { # PASS|FAIL TEXT
	echo "$1 $2"
	if [[ $1 == PASS ]]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}

# The ledger's answer for one cluster at this commit: "PASSED SELECTED".
ledger_at_head() { # CLUSTER
	local line
	line=$(CONF_CLUSTER=$1 SINCE=$commit e2e/conformance/status.sh | grep -E '^[0-9]+ selected;' | tail -n 1)
	# "91 selected; at ... on ipv4: 91 passed, 0 failed, 0 skipped (latest each), 0 without a result; ..."
	[[ $line =~ ^([0-9]+)\ selected\;.*:\ ([0-9]+)\ passed, ]] || { say "status.sh said: $line"; echo "0 -1"; return; }
	echo "${BASH_REMATCH[2]} ${BASH_REMATCH[1]}"
}
# The ledger records a run from a changed tree as COMMIT+dirty; the gate wants results of the commit.
dirty_at_head() { # CLUSTER
	awk -F'\t' -v c="${commit:0:12}+dirty" -v cl="$1" '$2 == c && $3 == cl' e2e/conformance/ledger.tsv | wc -l
}
# The shards (of 30, the split docs/conformance.md uses) that hold the ipv4 specs not yet
# passed at this commit: "K,K,..." for make conformance SHARD=K,K/30.
shards_not_passed() {
	local bin tmp k list
	bin=$(e2e/conformance/build.sh)
	tmp=$(mktemp -d)
	CONF_CLUSTER=ipv4 SINCE=$commit e2e/conformance/status.sh -not-passed >"$tmp/not-passed.txt"
	(
		source e2e/conformance/selection.sh
		select_cluster ipv4
		dry_run_specs "$bin" "$tmp" "$selection_focus" "$selection_skip" >/dev/null
	)
	for k in $(seq 1 30); do
		if "$bin/conformanceledger" shard -shard "$k/30" "$tmp/dry-run.xml" | grep -qxFf "$tmp/not-passed.txt"; then
			list+=${list:+,}$k
		fi
	done
	rm -rf -- "$tmp"
	echo "${list:-}"
}
verdict() { # CLUSTER WANT
	local ok selected
	read -r ok selected < <(ledger_at_head "$1")
	if ((selected != $2)); then
		result FAIL "conformance $1: the selection has $selected specs, the gate expects $2 (a change upstream or in selection.sh: update the gate with it)"
	elif ((ok == selected)) && (($(dirty_at_head "$1") == 0)); then
		result PASS "conformance $1: $ok of $selected specs passed at $commit (ledger.tsv)"
	else
		result FAIL "conformance $1: $ok of $selected specs passed at $commit (make conformance-status)"
	fi
}

if [[ -z $only || $only == conformance ]]; then
	# IPv4: the whole selection on two nodes (each its own zone), then the shards still holding
	# a spec not passed (the three-zone Traffic Distribution specs skip on two nodes) on six
	# nodes, three zones of two.
	read -r ok selected < <(ledger_at_head ipv4)
	if ((ok != selected)); then
		say "ipv4: $ok of $selected specs passed at this commit: make conformance (two nodes)"
		vm make conformance || true
	fi
	read -r ok selected < <(ledger_at_head ipv4)
	if ((ok != selected)); then
		shards=$(shards_not_passed)
		say "ipv4: $ok of $selected: shards $shards/30 on six nodes in three zones"
		[[ -z $shards ]] || vm env CONF_NODES=6 CONF_NODES_PER_ZONE=2 make conformance SHARD="$shards/30" || true
	fi
	verdict ipv4 91
	read -r ok selected < <(ledger_at_head dual-stack)
	if ((ok != selected)); then
		say "dual-stack: $ok of $selected specs passed at this commit: make conformance CONF_CLUSTER=dual-stack"
		vm env CONF_CLUSTER=dual-stack make conformance || true
	fi
	verdict dual-stack 22
fi

if [[ -z $only || $only == e2e ]]; then
	# The kernel matrix's e2e line at this commit, on each kernel: IPVSPROXY_VM_KERNEL tells the
	# suite which kernel it runs on (Debian 12's 6.1 has no twos: its scenarios expect the
	# fallback), and the rows land in e2e/matrix/kernels.tsv.
	make build >/dev/null
	for kernel in 6.1 6.12; do
		out=$(mktemp)
		if vm env IPVSPROXY_MATRIX_STAGES=e2e make kernel-matrix KERNELS="$kernel" >"$out" 2>&1; then
			result PASS "e2e on $kernel: $(grep -E '^matrix: ' "$out" | tail -n 1)"
		else
			result FAIL "e2e on $kernel: $(grep -E '^matrix: ' "$out" | tail -n 1) (log: $out)"
		fi
	done
fi

if [[ -z $only || $only == fresh ]]; then
	out=$(mktemp)
	if vm make fresh-check >"$out" 2>&1; then
		result PASS "make fresh-check: $(grep -E 'took|passed' "$out" | tail -n 1)"
	else
		result FAIL "make fresh-check (log: $out)"
	fi
fi

echo "$passed passed, $failed failed"
((failed == 0))
