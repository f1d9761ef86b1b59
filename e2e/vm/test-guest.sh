#!/usr/bin/env bash
# test-guest.sh PLAN RESULTS — runs inside the VM (see test-in-vm.sh). Loads the kernel modules the
# adapters need, runs every binary of PLAN with -test.v, counts top-level tests and writes the
# summary line to RESULTS/summary; skips are counted at every depth, so a real-kernel subtest
# that skipped shows. Exit status: 0 only if nothing failed.
set -uo pipefail
plan=$1 results=$2

# Load up front what the adapters use so a missing module fails loudly here, not as a confusing
# netlink error inside a test. Later loads happen on demand through the kernel's modprobe helper.
modules=(ip_vs ip_vs_rr ip_vs_wrr ip_vs_twos ip_vs_sh dummy veth bridge nf_conntrack
	nf_conntrack_netlink ip_set ip_set_hash_ip ip_set_hash_ipport ip_set_hash_ipportip
	ip_set_hash_ipportnet ip_set_hash_net ip_set_bitmap_port xt_set xt_mark xt_comment
	xt_conntrack xt_addrtype xt_MASQUERADE iptable_nat iptable_filter nft_compat)
# Debian 12's 6.1 kernels have no ip_vs_twos (smoke.sh checks that).
case ${IPVSPROXY_VM_KERNEL:-6.12} in
6.1 | cloud) mapfile -t modules < <(printf '%s\n' "${modules[@]}" | grep -vx ip_vs_twos) ;;
esac
# One modprobe for all: every program started from the 9p root costs time under emulation.
if ! modprobe -a "${modules[@]}"; then
	for m in "${modules[@]}"; do
		modprobe "$m" || echo "test-guest: modprobe $m failed"
	done
fi

# Every kernel test must run here: internal/kerneltest fails a skip in the VM.
export IPVSPROXY_IN_VM=1
passed=0 failed=0 skipped=0
while read -r name bin dir; do
	echo "=== binary $name"
	started=$SECONDS
	log=$(mktemp)
	if [[ $bin == *.sh ]]; then # a script (smoke, self-tests) takes no go test flags
		(cd "$dir" && "$bin") 2>&1 | tee "$log"
	else
		args=(-test.v)
		[[ -n ${TEST_RUN:-} ]] && args+=(-test.run "$TEST_RUN")
		[[ -n ${TEST_BENCH:-} ]] && args+=(-test.bench "$TEST_BENCH" -test.benchmem)
		[[ -n ${TEST_BENCHTIME:-} ]] && args+=(-test.benchtime "$TEST_BENCHTIME")
		(cd "$dir" && "$bin" "${args[@]}") 2>&1 | tee "$log"
	fi
	rc=${PIPESTATUS[0]}
	p=$(grep -c '^--- PASS: ' "$log")
	f=$(grep -c '^--- FAIL: ' "$log")
	s=$(grep -cE '^ *--- SKIP: ' "$log")
	# A binary that dies (panic, timeout, bad flag) may print no FAIL line; count it once.
	if ((rc != 0 && f == 0)); then f=1; fi
	echo "=== binary $name: exit $rc, $p passed, $f failed, $s skipped, $((SECONDS - started))s"
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
	rm -f "$log"
done <"$plan"

echo "skipped: $skipped"
echo "$passed passed, $failed failed" | tee "$results/summary"
((failed == 0))
