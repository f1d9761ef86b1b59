#!/usr/bin/env bash
# bench-daemon.sh — the daemon tier of the benchmarks: the real `ipvsproxy run` process and
# kube-proxy v1.36.3's own binary (--proxy-mode=ipvs), one after the other, on the VM's kernel
# against the real kube-apiserver on this machine, with N Services × 10 endpoints created through
# the API before either starts. Per side and N: peak RSS (VmHWM), start to ready, start to the
# first hostNetwork connection through a cluster IP, one endpoint change from API write to the
# kernel (and network_programming_duration_seconds), the cold sync, one periodic full re-check, and the
# process's CPU time over the run.
#
#   e2e/vm/bench-daemon.sh [--smoke] [--churn] [N...]      (default 1000 10000)
#
# --churn: after those figures, continuous endpoint churn (IPVSPROXY_BENCH_CHURN changes a second,
# default 5, over random Services, e2e/endpointchurn) until the side ended at least three full
# re-checks and two minutes passed, each side run with its own default sync periods: every change's
# latency from its trigger time to the kernel (raw, …-churn-<side>-<N>.tsv beside the figures), the
# side's network_programming_duration_seconds over the window, its re-checks' duration and its CPU.
# --smoke: N=100, no periodic re-check; fails unless both sides became ready, programmed every
# Service and produced their figures (make test runs it); with --churn, 20 s of churn whose every
# change must reach the kernel. Otherwise results go to
# benchmarks/results/<date>-vm-daemon.json (one JSON object per side and N), a Markdown table
# and PNG plots beside it, and, with the heap profiles, under $IPVSPROXY_E2E_CACHE/runs.
# Env: IPVSPROXY_BENCH_SIDES (default "ipvsproxy kube-proxy"), IPVSPROXY_VM_MEM (guest MiB,
# default 3072), IPVSPROXY_BENCH_OUT (the JSON file), IPVSPROXY_BENCH_HEAP=1 (keep ipvsproxy's
# heap profile per N), IPVSPROXY_BENCH_CPU=1 (ipvsproxy's CPU profile until ready, per N),
# IPVSPROXY_BENCH_ENV (NAME=VALUE words for the environment of the side ipvsproxy-env, e.g.
# "GOMEMLIMIT=64MiB"), IPVSPROXY_BENCH_BASELINE (the binary of the side ipvsproxy-baseline, to
# measure a change: IPVSPROXY_BENCH_SIDES="ipvsproxy-baseline ipvsproxy kube-proxy"),
# IPVSPROXY_BENCH_WATCHLIST=false (client-go's streaming watch-list off in both proxies),
# IPVSPROXY_BENCH_CONTROLPLANE and IPVSPROXY_BENCH_HAVE (reuse a kept control plane holding that
# many Services; give each run on it a distinct IPVSPROXY_BENCH_ROUND, 0 to 25, so that its
# endpoint change adds an address no earlier run added), IPVSPROXY_BENCH_TIMEOUT (seconds a side may take to become ready, default 1800; one that does
# not still reports its peak RSS so far), IPVSPROXY_BENCH_CHANGES (0 to 20: that many more endpoint
# changes after the full re-check, at pseudo-random points of the sync period, each timed).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${IPVSPROXY_E2E_CACHE:-/var/cache/ipvsproxy-e2e}
go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
smoke= churn=
while [[ ${1:-} == --smoke || ${1:-} == --churn ]]; do
	[[ $1 == --smoke ]] && smoke=1
	[[ $1 == --churn ]] && churn=${IPVSPROXY_BENCH_CHURN:-5}
	shift
done
if [[ -n $smoke ]]; then sizes=(100); else sizes=("${@:-1000 10000}"); fi
read -r -a sizes <<<"${sizes[*]}"
sides=${IPVSPROXY_BENCH_SIDES:-ipvsproxy kube-proxy}
say() { printf 'bench-daemon: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
[[ $(id -u) == 0 ]] || die "run as root (the VM shares / and the guest builds network namespaces)"

# The same slots of host ports as e2e/run.sh, so that this runs beside an e2e run.
# A reused control plane (below) keeps the slot its run took: its processes hold the lock.
slot=${IPVSPROXY_BENCH_CONTROLPLANE:+reused}
while [[ -z $slot ]]; do
	for s in 0 1 2; do
		exec 8>"/var/lock/ipvsproxy-e2e-slot-$s.lock"
		if flock -n 8; then slot=$s; break; fi
		exec 8>&-
	done
	[[ -n $slot ]] || { say "three e2e runs in progress; waiting for a slot"; sleep 10; }
done
[[ $slot == reused ]] || export APISERVER_PORT=$((6443 + 100 * slot)) ETCD_CLIENT_PORT=$((2379 + 100 * slot)) ETCD_PEER_PORT=$((2380 + 100 * slot))
t_all=$SECONDS
mkdir -p "$cache/runs"
work=$(mktemp -d "$cache/runs/bench-daemon.XXXXXX")
cp_dir=$work/controlplane
cleanup() {
	local rc=$?
	[[ -e $cp_dir/.ipvsproxy-e2e-controlplane ]] && "$repo/e2e/controlplane/stop.sh" "$cp_dir" >/dev/null 2>&1
	if ((rc == 0)) && [[ -z ${IPVSPROXY_E2E_KEEP:-} ]]; then rm -rf -- "$work"; else say "logs kept in $work"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cp_bin=$("$repo/e2e/controlplane/build.sh")
[[ -x $cp_bin/kube-proxy ]] || die "$cp_bin/kube-proxy missing"
make -s -C "$repo" build >&2
(cd "$repo" && CGO_ENABLED=0 "$go" build -trimpath -o "$work/echoserver" ./e2e/echoserver)
[[ -z $churn ]] || (cd "$repo" && CGO_ENABLED=0 "$go" build -trimpath -o "$work/endpointchurn" ./e2e/endpointchurn)
"$here/prepare.sh" >/dev/null

kc() { "$cp_bin/e2ectl" "$@"; }
have=0
if [[ -n ${IPVSPROXY_BENCH_CONTROLPLANE:-} ]]; then
	# Another run's control plane, left running (its script killed with SIGKILL), with its
	# objects: creating 10,000 Services takes minutes on a loaded machine.
	cp_dir=$IPVSPROXY_BENCH_CONTROLPLANE have=${IPVSPROXY_BENCH_HAVE:?the Services it holds}
	trap 'exit 130' INT TERM
	trap - EXIT
	APISERVER_PORT=$(sed -n 's|^ *server: https://127.0.0.1:\([0-9]*\)$|\1|p' "$cp_dir/admin.kubeconfig")
	export KUBECONFIG=$cp_dir/admin.kubeconfig
else
	t=$SECONDS
	"$repo/e2e/controlplane/start.sh" "$cp_dir" >/dev/null 2>"$work/controlplane-start.log" || {
		cat "$work/controlplane-start.log" >&2
		die "control plane did not start"
	}
	say "control plane up ($((SECONDS - t))s)"
	export KUBECONFIG=$cp_dir/admin.kubeconfig
	kc create-nodes --node bench=198.51.100.10 >/dev/null
	kc bench-probe-service bench-probe/probe 203.0.113.10:8080 >/dev/null
fi

out=${IPVSPROXY_BENCH_OUT:-$repo/benchmarks/results/$(date -u +%F)-vm-daemon.json}
[[ -n $smoke ]] && out=$work/smoke.json
mkdir -p "$work/logs"
round=${IPVSPROXY_BENCH_ROUND:-0} rc=0
[[ $round =~ ^[0-9]+$ ]] && ((round <= 25)) || die "IPVSPROXY_BENCH_ROUND must be 0 to 25 (the endpoint change adds 10.244.255.(200 + round + side))"
for n in "${sizes[@]}"; do
	t=$SECONDS
	((n <= have)) || kc bulk-services --from "$have" --count "$n" --endpoints 10 --workers 8 >&2
	((n <= have)) || have=$n
	say "$n Services × 10 endpoints created ($((SECONDS - t))s)"
	t=$SECONDS
	set +e
	IPVSPROXY_VM_PREPARED=1 "$here/run.sh" --mem "${IPVSPROXY_VM_MEM:-3072}" \
		--timeout "${IPVSPROXY_VM_TIMEOUT:-5400}" --results "$work/results-$n" --host-port "6443:$APISERVER_PORT" \
		-e "E2E_BIN=$cp_bin" -e "IPVSPROXY=$repo/bin/ipvsproxy" -e "ECHOSERVER=$work/echoserver" \
		-e "ADMIN_KUBECONFIG=$cp_dir/admin-guest.kubeconfig" -e "PROXIER_KUBECONFIG=$cp_dir/proxier.kubeconfig" \
		-e "BENCH_N=$n" -e "BENCH_SIDES=$sides" -e "BENCH_OUT=$work/results-$n/figures.json" \
		-e "BENCH_LOGS=$work/results-$n" -e "BENCH_RESYNC=$([[ -n $smoke ]] && echo 0 || echo 1)" \
		-e "BENCH_ROUND=$round" -e "BENCH_HEAP=${IPVSPROXY_BENCH_HEAP:-}" -e "BENCH_CPU=${IPVSPROXY_BENCH_CPU:-}" -e "BENCH_TIMEOUT=${IPVSPROXY_BENCH_TIMEOUT:-1800}" -e "BENCH_CHANGES=${IPVSPROXY_BENCH_CHANGES:-0}" \
		-e "BENCH_WATCHLIST=${IPVSPROXY_BENCH_WATCHLIST:-}" -e "BENCH_IPVSPROXY_ENV=${IPVSPROXY_BENCH_ENV:-}" -e "IPVSPROXY_BASELINE=${IPVSPROXY_BENCH_BASELINE:-}" \
		-e "BENCH_CHURN=$churn" -e "BENCH_CHURN_SMOKE=$smoke" -e "ENDPOINTCHURN=$work/endpointchurn" \
		-- "$here/bench-daemon-guest.sh" >&2
	vm_rc=$?
	set -e
	round=$((round + 2))
	say "N=$n: VM run $((SECONDS - t))s, exit $vm_rc"
	((vm_rc == 0)) || rc=1
	[[ -f $work/results-$n/figures.json ]] && cat "$work/results-$n/figures.json" >>"$out"
	# Each side's memory over its run (bench-daemon-guest.sh's sample_rss) and its churn's raw
	# samples beside the figures.
	if [[ -z $smoke ]]; then
		for f in "$work/results-$n"/rss-*.tsv "$work/results-$n"/churn-*.tsv; do
			[[ -f $f ]] && cp "$f" "${out%.json}-${f##*/}"
		done
	fi
done
say "whole run $((SECONDS - t_all))s; figures in $out"
cat "$out"
if [[ -z $smoke ]]; then
	# The Markdown table beside the JSON: one row per side and N.
	{
		echo "| Services × 10 | side | peak RSS MiB | ready s | first connection s | endpoint change s | network programming s | cold sync s | full re-check s | re-check's real servers: table / dumps | CPU s |"
		echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
		jq -r 'def f: if . == null then "—" else tostring end;
			"| \(.services) | \(.side)\(if .ok then "" else " (not ready after \(.timed_out_after_s // "?") s)" end) | \(.peak_rss_mib|f) | \(.ready_s|f) | \(.connect_s|f) | \(.endpoint_change_s|f) | \(.network_programming_s|f) | \(.cold_sync_s|f) | \(.full_resync_s|f) | \(if .recheck_read_from_table == null then "—" else "\(.recheck_read_from_table) / \(.recheck_read_dumped)" end) | \(.cpu_s|f) |"' "$out"
		if [[ -n $churn ]]; then
			echo
			echo "Churn: endpoint changes over random Services, each side at its default sync periods; latency from the slice's trigger time to the new real server in the kernel (raw), and the side's own network_programming_duration_seconds over the window (p99 as its bucket's bound)."
			echo
			echo "| Services × 10 | side | changes/s | window s | changes | raw p50 / p90 / p99 / max s | over 1 s | histogram ≤ 1 s | histogram p99 ≤ s | re-checks | re-check mean s | partial syncs (mean s) | CPU s (per re-check) |"
			echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
			jq -r 'select(.churn != null) | .churn as $c | "| \(.services) | \(.side) | \($c.rate_per_s) | \($c.window_s) | \($c.changes) | \($c.raw_p50_s) / \($c.raw_p90_s) / \($c.raw_p99_s) / \($c.raw_max_s) | \($c.raw_over_1s) | \($c.hist_le_1s) of \($c.hist_count) | \($c.hist_p99_le_s) | \($c.rechecks) | \($c.recheck_mean_s) | \($c.partial_syncs) (\($c.partial_mean_s)) | \($c.cpu_s) (\($c.cpu_per_recheck_period_s)) |"' "$out"
		fi
	} >"${out%.json}.md"
	say "table in ${out%.json}.md"
	# The plots beside it (benchmarks/harness/cmd/daemonplot: peak RSS, ready, cold sync, full
	# re-check against Services, a line per side).
	(cd "$repo/benchmarks/harness" && "$go" run ./cmd/daemonplot -o "${out%.json}" "$out") >&2 ||
		say "warning: the plots were not drawn"
fi

if [[ -n $smoke ]]; then
	# Both sides ready, every Service (100 + the probe + default/kubernetes) programmed, each
	# figure present.
	for side in $sides; do
		line=$(grep "\"side\":\"$side\"" "$out" || true)
		[[ $line == *'"ok":true'* ]] || die "smoke: $side did not become ready or program the endpoint change"
		vs=$(sed -n 's/.*"tcp_virtual_servers":\([0-9]*\).*/\1/p' <<<"$line")
		((vs >= 101)) || die "smoke: $side programmed $vs TCP virtual servers, want at least 101"
		for f in peak_rss_mib ready_s connect_s endpoint_change_s cold_sync_s; do
			[[ $line =~ \"$f\":[0-9] ]] || die "smoke: $side has no $f: $line"
		done
		if [[ -n $churn ]]; then
			jq -e 'select(.churn != null) | .churn | .changes > 0 and .write_errors == 0 and .not_seen == 0 and .hist_count > 0' <<<"$line" >/dev/null ||
				die "smoke: $side's churn did not bring every change to the kernel, or its histogram saw none: $line"
		fi
	done
	say "smoke passed"
fi
exit "$rc"
