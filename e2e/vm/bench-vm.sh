#!/usr/bin/env bash
# bench-vm.sh — tier 2 of the benchmarks: ipvsproxy's sync on the real kernel inside the
# end-to-end VM (IPVS, the dummy kube-ipvs0 with its routes, ipset, iptables, conntrack), beside
# the floor: the same kernel objects created by bare adapter calls without the proxier's logic,
# and beside the anchor: kube-proxy v1.37.2's IPVS proxier on the same kernel (kubeproxy-bench
# -kernel: its own netlink, ipset and iptables code). Each run is a fresh network namespace in
# the guest; nothing leaves it.
#
#   e2e/vm/bench-vm.sh [--node] [SERVICES...]   (default 1000; the VM emulates its CPU: keep shapes small)
#
# --node runs the same on this machine's own kernel instead (make bench-node, on a bare-metal node
# with IPVS and the dummy driver; it loads their modules).
# IPVSPROXY_BENCH_MODES picks the sides (default "floor ours kube-proxy"; "floor ours" skips
# kube-proxy, whose every sync takes seconds here). IPVSPROXY_BENCH_PAIRS (default 3) is how many
# processes of the floor and of ours run per shape, alternating, every other pair in reverse
# order (the floor's own cold sync varies by half between boots and runs); kube-proxy runs once
# (IPVSPROXY_BENCH_KP_PROCESSES processes, in the first pairs, when set: each gives one sample of
# its cold sync, 3 minutes at 1,000 Services here), one repeat of each operation unless
# IPVSPROXY_BENCH_KP_REPEATS says more, and only the operations
# IPVSPROXY_BENCH_KP_OPS names, comma-separated, when set (kubeproxy-bench -ops: at 10,000 Services
# its cold sync takes half an hour under emulation and every later sync most of a minute, so five
# samples of its full sync fit in a run only when the other operations are left out).
# With kube-proxy among the sides, what a process costs on the kernel is measured before the shapes
# and after them (<results>-process-cost.json): kube-proxy starts one per ipset entry, and its cold
# sync's cold_calls say how long it waited for them.
# IPVSPROXY_BENCH_GOGC, when set, is the floor's and ours' GOGC (e.g. off: whether the garbage
# collector explains why the same kernel calls take longer inside ours than inside the floor).
# IPVSPROXY_BENCH_FLOOR_ORDER=interleaved makes the floor write 64 virtual servers in one send and
# then each one's real servers in one send, as the proxier does, instead of every virtual server
# first (64 per send) and then all real servers 64 per send (kernel-bench -floor-order).
# IPVSPROXY_BENCH_NO_SERVICE_CIDR=1 runs the floor and ours without a Service CIDR: every cluster IP
# bound on kube-ipvs0, as kube-proxy binds them (kernel-bench -no-service-cidr).
# IPVSPROXY_BENCH_BASELINE=<git revision> builds kernel-bench at that revision too, for the mode
# "baseline" (ours as that revision wrote it, its side named "ipvsproxy baseline (kernel)"): an A/B
# of the code inside one boot, where boots differ more than most changes.
#
# Prints one line per shape and leaves benchmarks/results/<date>-<host>-vm.json beside the
# harness's reports (cmd/bench -merge reads it into the Markdown table).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${IPVSPROXY_E2E_CACHE:-/var/cache/ipvsproxy-e2e}
export PATH=/usr/local/go/bin:$PATH
node=
if [[ ${1:-} == --node ]]; then
	node=1
	shift
fi
shapes=("${@:-1000}")
modes=${IPVSPROXY_BENCH_MODES:-floor ours kube-proxy}
pairs=${IPVSPROXY_BENCH_PAIRS:-3}
kp_processes=${IPVSPROXY_BENCH_KP_PROCESSES:-1}
((kp_processes >= 1 && kp_processes <= pairs)) || { echo "bench-vm: IPVSPROXY_BENCH_KP_PROCESSES must be 1 to IPVSPROXY_BENCH_PAIRS ($pairs)" >&2; exit 2; }

[[ -n $node ]] || "$here/prepare.sh"
mkdir -p "$cache/runs"
work=$(mktemp -d "$cache/runs/bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/results"
(cd "$repo/benchmarks/harness" && go build -o "$work/kernel-bench" ./cmd/kernel-bench && go build -o "$work/kubeproxy-bench" ./cmd/kubeproxy-bench)
if [[ -n ${IPVSPROXY_BENCH_BASELINE:-} ]]; then
	git -C "$repo" worktree add --detach "$work/baseline" "$IPVSPROXY_BENCH_BASELINE" >/dev/null
	(cd "$work/baseline/benchmarks/harness" && go build -o "$work/kernel-bench-baseline" ./cmd/kernel-bench)
	git -C "$repo" worktree remove --force "$work/baseline"
fi

cat >"$work/guest.sh" <<GUEST
#!/usr/bin/env bash
set -euo pipefail
modprobe ip_vs 2>/dev/null || true
modprobe dummy 2>/dev/null || true
# Load every module either side needs first, and warm up once: the first ipset of a type, the first
# iptables-restore and IPVS's first service load modules, which under emulation takes seconds.
for m in ip_vs ip_vs_twos ip_vs_rr ip_vs_wrr dummy ip_set ip_set_hash_ip ip_set_hash_ipport ip_set_hash_ipportip \
	ip_set_hash_ipportnet ip_set_hash_net ip_set_bitmap_port xt_set xt_comment xt_mark xt_conntrack xt_addrtype \
	iptable_nat iptable_filter nf_conntrack nf_conntrack_netlink; do
	modprobe \$m 2>/dev/null || true
done
# settle waits until the CPU was at least 90% idle for a second (30 s at most): the kernel tears a
# namespace down in the background after its process exits (its virtual servers, sets, conntrack
# table), and under emulation that work would otherwise land in the next side's timings.
settle() {
	local i u n s id rest t1 i1
	for i in \$(seq 30); do
		read -r _ u n s id rest </proc/stat
		t1=\$((u + n + s + id)) i1=\$id
		sleep 1
		read -r _ u n s id rest </proc/stat
		(( (id - i1) * 100 >= 90 * (u + n + s + id - t1) )) && return
	done
	echo "bench-vm: the guest never settled; timing anyway" >&2
}
bench() { # MODE SERVICES REPEATS
	settle
	if [[ \$1 == kube-proxy ]]; then
		IPVSPROXY_BENCH_NETNS=private unshare --net -- "$work/kubeproxy-bench" -kernel -services \$2 -repeats \$3 -ops "${IPVSPROXY_BENCH_KP_OPS:-}"
	elif [[ \$1 == baseline ]]; then
		${IPVSPROXY_BENCH_GOGC:+GOGC=$IPVSPROXY_BENCH_GOGC} IPVSPROXY_BENCH_NETNS=private unshare --net -- "$work/kernel-bench-baseline" -mode ours -services \$2 -repeats \$3 ${IPVSPROXY_BENCH_NO_SERVICE_CIDR:+-no-service-cidr} |
			sed 's/"side":"ipvsproxy (kernel)"/"side":"ipvsproxy baseline (kernel)"/'
	else
		${IPVSPROXY_BENCH_GOGC:+GOGC=$IPVSPROXY_BENCH_GOGC} IPVSPROXY_BENCH_NETNS=private unshare --net -- "$work/kernel-bench" -mode \$1 -services \$2 -repeats \$3 ${IPVSPROXY_BENCH_FLOOR_ORDER:+-floor-order $IPVSPROXY_BENCH_FLOOR_ORDER} ${IPVSPROXY_BENCH_NO_SERVICE_CIDR:+-no-service-cidr}
	fi
}
for mode in $modes; do
	bench \$mode 20 1 >/dev/null
done
# What starting a process costs on this kernel and CPU: kube-proxy adds every ipset entry with a
# process of its own, ipvsproxy with netlink messages, many entries each (kubeproxy-bench
# -process-cost: 300 entries a process each, a message each, in batches, and in one ipset
# restore), once before the shapes and once after them.
process_cost() {
	settle
	IPVSPROXY_BENCH_NETNS=private unshare --net -- "$work/kubeproxy-bench" -process-cost 300 >>"$work/results/processcost.jsonl"
}
[[ " $modes " == *" kube-proxy "* ]] && process_cost
for n in ${shapes[*]}; do
	for pair in \$(seq $pairs); do
		# Every other pair runs the sides in reverse order, so that neither always follows the other.
		order="$modes"
		(( pair % 2 == 0 )) && order=\$(printf '%s\\n' $modes | tac)
		for mode in \$order; do
			# kube-proxy's every sync is a full one (seconds each here): one process (or
			# IPVSPROXY_BENCH_KP_PROCESSES), one repeat of each operation.
			repeats=3
			if [[ \$mode == kube-proxy ]]; then
				(( pair <= $kp_processes )) || continue
				repeats=${IPVSPROXY_BENCH_KP_REPEATS:-1}
			fi
			bench \$mode \$n \$repeats >"$work/results/\$mode-\$n-\$pair.json"
		done
	done
done
[[ " $modes " == *" kube-proxy "* ]] && process_cost
true
GUEST
chmod +x "$work/guest.sh"
if [[ -n $node ]]; then
	"$work/guest.sh"
	out=$repo/benchmarks/results/$(date -u +%F)-$(hostname)-node.json
else
	t_vm=$SECONDS
	IPVSPROXY_VM_PREPARED=1 "$here/run.sh" --results "$work/results" -- "$work/guest.sh"
	vm_seconds=$((SECONDS - t_vm + 1))
	out=$repo/benchmarks/results/$(date -u +%F)-$(hostname)-vm.json
fi
mkdir -p "$(dirname "$out")"
{
	echo '['
	sep=
	for f in "$work"/results/*-*.json; do
		printf '%s' "$sep"
		cat "$f"
		sep=,
	done
	echo ']'
} >"$out"
echo "wrote $out"
if [[ -s $work/results/processcost.jsonl ]]; then
	jq -s . "$work/results/processcost.jsonl" >"${out%.json}-process-cost.json"
	echo "wrote ${out%.json}-process-cost.json"
fi
# No sample can be longer than the whole VM run: such a sample timed a jump of the guest's clock (seen
# once under TCG: 25 hours inside one of kube-proxy's cold syncs, the guest's uptime 92,421 s after
# a 964 s run). Such a sample does not count; say which, loudly, beside the results.
if [[ -n ${vm_seconds:-} ]]; then
	jq -r --argjson max $((vm_seconds * 1000)) '.[] | . as $r | $r.millis | to_entries[] | select(any(.value[]; . > $max)) |
		"bench-vm: WARNING: \($r.side) \($r.shape) \(.key): a sample longer than the whole VM run (\(.value | map(floor)) ms): the guest clock jumped; it does not count"' "$out" >&2
fi
# The cold syncs per shape: the median of each side's processes, and ours against the floor's.
cold() { grep -ho '"cold full sync":\[[0-9.]*' "$@" | sed 's/.*\[//' | sort -n; }
median() { awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]}'; }
# A run without the floor (IPVSPROXY_BENCH_MODES="ours kube-proxy") has no line, and no error.
for n in ${shapes[*]}; do
	floor=$(cold "$work"/results/floor-"$n"-*.json 2>/dev/null | median || true)
	ours=$(cold "$work"/results/ours-"$n"-*.json 2>/dev/null | median || true)
	[[ -n $floor && -n $ours ]] || continue
	echo "cold sync, $n Services: floor $(cold "$work"/results/floor-"$n"-*.json | tr '\n' ' ')ms, ours $(cold "$work"/results/ours-"$n"-*.json | tr '\n' ' ')ms; medians $floor / $ours ms, ours $(awk -v a="$ours" -v b="$floor" 'BEGIN {printf "%.2f", a / b}')x the floor"
done
