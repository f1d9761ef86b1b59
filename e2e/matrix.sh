#!/usr/bin/env bash
# matrix.sh — the compatibility matrices of docs/compatibility.md, each line a run in the VM:
#
#   e2e/matrix.sh kubernetes [MINOR...]   the core e2e scenarios against each minor's own
#                                         kube-apiserver (default 1.35 1.36 1.37; build.sh builds
#                                         an older one from e2e/controlplane/k8s/MINOR)
#   e2e/matrix.sh kernels [FLAVOUR...]    `make vm-test`'s VM tests and the e2e suite on each of
#                                         Debian 12's kernels (default 6.12 6.1 cloud; prepare.sh)
#
# Each line's result replaces its row in e2e/matrix/kubernetes.tsv or e2e/matrix/kernels.tsv
# (the commit, the date, what ran and how long it took) when the script ends: the file is the
# current table, its history is git's. Exits 1 when any line failed. The whole matrix is long:
# run one minor or one kernel per call (`make k8s-matrix K8S=1.35`,
# `make kernel-matrix KERNELS=6.1`), one VM run at a time on the machine.
#
# Environment: IPVSPROXY_MATRIX_SCENARIOS overrides the scenarios (kubernetes: the core set
# below; kernels: every scenario, as `make e2e`). IPVSPROXY_MATRIX_STAGES chooses a kernel line's
# stages (default `vm-test e2e`); only the rows of the stages that ran are replaced.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

# The core scenarios (docs/testing.md): each kind of Service in both families, UDP in both, the
# Service CIDR, and the clean-up (last).
core="tutorial-clusterip ipv6-dual-stack-clusterip ipv6-prefer-dual-stack
	tutorial-nodeport ipv6-nodeport tutorial-loadbalancer ipv6-loadbalancer-local
	external-ip-held-by-node ipv6-external-ip internal-traffic-local
	udp-endpoint-removed ipv6-udp-endpoint-removed service-cidr-route cleanup-leaves-nothing"

matrix=${1:-}
shift || true
case $matrix in
kubernetes) items=("${@:-}"); ((${#items[@]} && ${#items[0]})) || items=(1.35 1.36 1.37) ;;
kernels) items=("${@:-}"); ((${#items[@]} && ${#items[0]})) || items=(6.12 6.1 cloud) ;;
*) echo "usage: $0 kubernetes|kernels [ITEM...]" >&2; exit 2 ;;
esac

stages=" ${IPVSPROXY_MATRIX_STAGES:-vm-test e2e} "
for stage in $stages; do
	[[ $stage == vm-test || $stage == e2e ]] || { echo "matrix: IPVSPROXY_MATRIX_STAGES: no stage $stage (vm-test, e2e)" >&2; exit 2; }
done

ledger=$here/matrix/$matrix.tsv
mkdir -p "$here/matrix"
header=$'item\tstage\tversion\tpassed\tfailed\tseconds\tcommit\tdate'
commit=$(git -C "$repo" rev-parse --short=12 HEAD)
[[ -z $(git -C "$repo" status --porcelain --untracked-files=no) ]] || commit+="-dirty"
out=$(mktemp -d)
: >"$out/rows"

# The ledger is written once, when the script ends (also when it is interrupted): a row written
# earlier would change a tracked file under the next stage's build (make e2e rebuilds
# bin/ipvsproxy, which then reports a dirty tree, and with it the image).
write_ledger() {
	[[ -s $out/rows ]] || return 0
	{
		echo "$header"
		[[ -f $ledger ]] && awk -F'\t' 'NR == FNR { done[$1 FS $2] = 1; next } FNR > 1 && !(($1 FS $2) in done)' "$out/rows" "$ledger"
		cat "$out/rows"
	} >"$out/ledger"
	{ head -n1 "$out/ledger"; tail -n +2 "$out/ledger" | sort -t$'\t' -k1,1V -k2,2; } >"$ledger"
}
trap 'write_ledger; rm -rf -- "$out"' EXIT

# record ITEM STAGE VERSION LOG SECONDS RC [sum]: the log's closing `N passed, N failed` (none:
# the run itself failed) becomes the row of ITEM and STAGE; with sum, every such line of the log
# is added up (make vm-test prints one for the Go tests, then one for the kernel-limits boot).
# A stage that exited non-zero without a failure counted is one failure.
record() {
	local item=$1 stage=$2 version=$3 log=$4 seconds=$5 rc=$6 mode=${7:-} summary passed failed
	summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | if [[ $mode == sum ]]; then cat; else tail -n1; fi |
		awk '{ p += $1; f += $3; n++ } END { if (n) print p, f }')
	if [[ -n $summary ]]; then
		read -r passed failed <<<"$summary"
	else
		passed=0 failed=1
	fi
	((rc == 0 || failed > 0)) || failed=1
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$item" "$stage" "$version" "$passed" "$failed" "$seconds" "$commit" "$(date -u +%FT%TZ)" >>"$out/rows"
	echo "matrix: $matrix $item $stage ($version): $passed passed, $failed failed in ${seconds}s"
	((failed == 0))
}

rc=0
for item in "${items[@]}"; do
	case $matrix in
	kubernetes)
		newest=$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "$repo/e2e/controlplane/go.mod")
		if [[ $item == "$(sed -E 's/^v([0-9]+\.[0-9]+)\..*/\1/' <<<"$newest")" ]]; then
			version=$newest k8s=
		else
			mod=$repo/e2e/controlplane/k8s/$item/go.mod
			[[ -f $mod ]] || { echo "matrix: no Kubernetes $item (no $mod)" >&2; rc=1; continue; }
			version=$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "$mod") k8s=$item
		fi
		start=$SECONDS
		IPVSPROXY_E2E_K8S=$k8s IPVSPROXY_E2E_SCENARIOS=${IPVSPROXY_MATRIX_SCENARIOS:-$core} \
			"$repo/e2e/run.sh" 2>&1 | tee "$out/run.log"
		record "$item" e2e-core "$version" "$out/run.log" $((SECONDS - start)) "$?" || rc=1
		;;
	kernels)
		IPVSPROXY_VM_KERNEL=$item "$repo/e2e/vm/prepare.sh" >"$out/prepare.log" 2>&1 || {
			cat "$out/prepare.log" >&2
			rc=1
			continue
		}
		env_file=${IPVSPROXY_E2E_CACHE:-/var/cache/ipvsproxy-e2e}/current.env
		[[ $item == 6.12 ]] || env_file=${env_file%.env}-$item.env
		version=$(. "$env_file" && echo "$KVER")
		if [[ $stages == *" vm-test "* ]]; then
			start=$SECONDS
			IPVSPROXY_VM_KERNEL=$item make -C "$repo" vm-test 2>&1 | tee "$out/vm-test.log"
			record "$item" vm-test "$version" "$out/vm-test.log" $((SECONDS - start)) "$?" sum || rc=1
		fi
		[[ $stages == *" e2e "* ]] || continue
		start=$SECONDS
		if [[ -n ${IPVSPROXY_MATRIX_SCENARIOS:-} ]]; then
			IPVSPROXY_VM_KERNEL=$item IPVSPROXY_E2E_SCENARIOS=$IPVSPROXY_MATRIX_SCENARIOS "$repo/e2e/run.sh" 2>&1 | tee "$out/e2e.log"
		else
			IPVSPROXY_VM_KERNEL=$item make -C "$repo" e2e 2>&1 | tee "$out/e2e.log"
		fi
		record "$item" e2e "$version" "$out/e2e.log" $((SECONDS - start)) "$?" || rc=1
		;;
	esac
done
exit "$rc"
