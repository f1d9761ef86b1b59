#!/usr/bin/env bash
# bench-daemon.sh — the daemon tier of the benchmarks: the real `ipvsproxy run` process and
# kube-proxy's own binary (built from the k8s.io/kubernetes module e2e/controlplane pins) in its
# nftables, IPVS and iptables modes, one after the other, on the VM's kernel against the real
# kube-apiserver on this machine, with N Services × 10 endpoints created through the API before
# any starts. Per side and N: peak RSS (VmHWM), start to ready, start to the first hostNetwork
# connection through a cluster IP, one endpoint change from API write to the kernel (and
# network_programming_duration_seconds), the cold sync, one periodic sync, the process's CPU time,
# a series of endpoint changes read from each side's own latency histogram, and the Service of
# 100,000 endpoints; with the data plane, what a packet pays through each side's kernel state
# (bench-dataplane-guest.sh).
#
#   e2e/vm/bench-daemon.sh [--smoke] [--churn] [N...]  the control plane (default 1000 10000 30000)
#   e2e/vm/bench-daemon.sh --dataplane [N...]          the data plane (default 1000 10000 30000)
#   e2e/vm/bench-daemon.sh --dataplane-smoke           the data plane's smoke form
#
# --smoke: N=100, no periodic sync, a short series and a Service of 2,000 endpoints; fails unless
# every side became ready, programmed every Service and the endpoint change, and produced its
# figures (make test runs it). --dataplane-smoke: N=100, ipvsproxy and kube-proxy's nftables
# mode (IPVSPROXY_BENCH_SIDES for more), every measurement short and taken once, 2,000 held
# connections; fails unless every side and the no-proxy baseline produced every figure (make
# test runs it too).
# --churn: after those figures, on the sides whose kernel state is IPVS (ipvsproxy,
# kube-proxy-ipvs), continuous endpoint churn (IPVSPROXY_BENCH_CHURN changes a second, default 5,
# over random Services, e2e/endpointchurn) until the side ended at least three full re-checks and
# two minutes passed, each side run with its own default sync periods: every change's latency from
# its trigger time to the kernel (raw, …-churn-<side>-<N>.tsv beside the figures), the side's
# network_programming_duration_seconds over the window, its re-checks' duration and its CPU; with
# --smoke, 20 s of churn whose every change must reach the kernel.
# Otherwise results go to benchmarks/results/<date>-vm-daemon.json (one JSON object per side and
# N) and, with the data plane, <date>-vm-dataplane.json (one per side, N and table state), a
# Markdown table and PNG plots beside each, and, with the logs, under $IPVSPROXY_E2E_CACHE/runs.
# Env: IPVSPROXY_BENCH_SIDES (default "ipvsproxy kube-proxy-nftables kube-proxy-ipvs", with the
# data plane also kube-proxy-iptables before kube-proxy-ipvs and ipvsproxy-again, the defaults once
# more, last), IPVSPROXY_BENCH_DATAPLANE=1 (the
# data plane in the same boots as the control plane: one cold sync of each side serves both),
# IPVSPROXY_BENCH_SERIES (endpoint changes read from each side's histogram, default 50; 0 with
# --dataplane), IPVSPROXY_BENCH_BIG (endpoints of bench/big, default 100000; 0 with --dataplane)
# and IPVSPROXY_BENCH_BIG_AT (the sizes whose boot writes it, default the first),
# IPVSPROXY_BENCH_BIG_TIMEOUT (seconds a side may take to program it, default 1800),
# IPVSPROXY_BENCH_TIMEOUTS ("SIDE=SECONDS ...": a side's own cap on becoming ready, e.g.
# "kube-proxy-ipvs=2400"), IPVSPROXY_BENCH_DP_OUT (the data plane's JSON file),
# IPVSPROXY_VM_MEM (guest MiB, default 3072, 4096 with the data plane), IPVSPROXY_BENCH_OUT (the
# JSON file), IPVSPROXY_BENCH_HEAP=1 (keep ipvsproxy's
# heap profile per N, at the end and where its heap goal was highest, and the goal every 10 s;
# a variant whose environment sets IPVSPROXY_PROFILING=true gets the same alone), IPVSPROXY_BENCH_CPU=1 (ipvsproxy's CPU profile until ready, per N),
# IPVSPROXY_BENCH_ENV (NAME=VALUE words for the environment of the side ipvsproxy-env, e.g.
# "GOMEMLIMIT=64MiB"), IPVSPROXY_BENCH_BASELINE (the binary of the side ipvsproxy-baseline, to
# measure a change: IPVSPROXY_BENCH_SIDES="ipvsproxy-baseline ipvsproxy kube-proxy"),
# IPVSPROXY_BENCH_VARIANTS ("NAME=ENV WORDS;..."; the side ipvsproxy-NAME runs with them, e.g.
# "rr=IPVSPROXY_IPVS_SCHEDULER=rr;again=" and IPVSPROXY_BENCH_SIDES="ipvsproxy ipvsproxy-rr
# kube-proxy-ipvs ipvsproxy-again": a flag's effect and the order's, in one boot),
# the data plane's DP_CONNECTS, DP_HOLD, DP_RATE_S, DP_IPERF_S, DP_UDP_S, DP_REPEAT, DP_PERF and
# DP_PERF_S (bench-dataplane-guest.sh; each given replaces the smoke form's value too),
# IPVSPROXY_BENCH_WATCHLIST=false (client-go's streaming watch-list off in both proxies),
# IPVSPROXY_BENCH_PREPARE_ONLY=1 (start the control plane and create the largest N's objects,
# then leave it running and print how to reuse it; no VM),
# IPVSPROXY_BENCH_CONTROLPLANE and IPVSPROXY_BENCH_HAVE (reuse a kept control plane holding that
# many Services; give each run on it a distinct IPVSPROXY_BENCH_ROUND, 0 to 25, so that its
# endpoint change adds an address no earlier run added; the data plane needs one whose Services
# were created with it, a NodePort in twenty), IPVSPROXY_BENCH_TIMEOUT (seconds a side may take to become ready, default 1800; one that does
# not still reports its peak RSS so far), IPVSPROXY_BENCH_CHANGES (0 to 20: that many more endpoint
# changes after the full re-check, at pseudo-random points of the sync period, each timed).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${IPVSPROXY_E2E_CACHE:-/var/cache/ipvsproxy-e2e}
go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
smoke= dataplane=${IPVSPROXY_BENCH_DATAPLANE:-} control=1 churn=
while [[ ${1:-} == --* ]]; do
	case $1 in
	--smoke) smoke=1 ;;
	--churn) churn=${IPVSPROXY_BENCH_CHURN:-5} ;;
	--dataplane) dataplane=1 control= ;;
	--dataplane-smoke) dataplane=1 control= smoke=1 ;;
	*) break ;;
	esac
	shift
done
[[ -z $churn || -n $control ]] || { echo "bench-daemon: --churn goes with the control plane, not --dataplane" >&2; exit 2; }
if [[ -n $smoke ]]; then sizes=(100); else sizes=("${@:-1000 10000 30000}"); fi
read -r -a sizes <<<"${sizes[*]}"
if [[ -n $dataplane && -n $smoke && -z $control ]]; then
	# The data plane's smoke (make test): ipvsproxy beside the mode upstream recommends; the
	# others' data plane is the same harness (IPVSPROXY_BENCH_SIDES adds them).
	sides=${IPVSPROXY_BENCH_SIDES:-ipvsproxy kube-proxy-nftables}
elif [[ -n $dataplane ]]; then
	# ipvsproxy first and once more last: its two passes bracket the others in time, so that a
	# drift of the host's load over the boot moves ipvsproxy's mean as it moves theirs.
	sides=${IPVSPROXY_BENCH_SIDES:-ipvsproxy kube-proxy-nftables kube-proxy-iptables kube-proxy-ipvs ipvsproxy-again}
else
	sides=${IPVSPROXY_BENCH_SIDES:-ipvsproxy kube-proxy-nftables kube-proxy-ipvs}
fi
# The control plane's extra phases; the data plane alone leaves them out (its own run takes long
# enough), and the smoke forms keep them short.
series=${IPVSPROXY_BENCH_SERIES:-$([[ -n $control ]] && echo 50 || echo 0)} series_pause="2s 10s"
big=${IPVSPROXY_BENCH_BIG:-$([[ -n $control ]] && echo 100000 || echo 0)} big_at=${IPVSPROXY_BENCH_BIG_AT:-${sizes[0]}}
resync=1
if [[ -n $smoke ]]; then
	resync=0 series=$([[ -n $control ]] && echo 5 || echo 0) series_pause="1s 3s" big=$([[ -n $control ]] && echo 2000 || echo 0) big_at=100
fi
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
# The run's own e2ectl and kube-proxy: build.sh's directory is shared by every checkout at the
# same pins, and another's build replaces e2ectl there while this run (hours at 30,000) uses it.
mkdir -p "$work/bin"
cp "$cp_bin/kube-proxy" "$work/bin/"
(cd "$repo/e2e/controlplane" && CGO_ENABLED=0 "$go" build -trimpath -buildvcs=false -o "$work/bin/e2ectl" ./cmd/e2ectl)
run_bin=$work/bin
make -s -C "$repo" build >&2
(cd "$repo" && CGO_ENABLED=0 "$go" build -trimpath -o "$work/echoserver" ./e2e/echoserver)
# The harness's guest tools: the traffic, the nftables reader, the histogram reader.
(cd "$repo/benchmarks/harness" && CGO_ENABLED=0 "$go" build -trimpath -o "$work/" ./cmd/loadgen ./cmd/nftservice ./cmd/promhist)
if [[ -n $dataplane ]]; then command -v iperf3 >/dev/null || die "iperf3 missing: run e2e/install-deps.sh"; fi
# The guest runs this machine's perf (it mounts this root) and it reports here.
[[ ${DP_PERF:-} != 1 ]] || command -v perf >/dev/null || die "DP_PERF=1 needs perf: apt-get install linux-perf"
[[ -z $churn ]] || (cd "$repo" && CGO_ENABLED=0 "$go" build -trimpath -o "$work/endpointchurn" ./e2e/endpointchurn)
"$here/prepare.sh" >/dev/null

kc() { "$run_bin/e2ectl" "$@"; }
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
	[[ -n $dataplane ]] && kc dataplane-services --pod 203.0.113.10 >/dev/null
fi

out=${IPVSPROXY_BENCH_OUT:-$repo/benchmarks/results/$(date -u +%F)-vm-daemon.json}
dp_out=${IPVSPROXY_BENCH_DP_OUT:-$repo/benchmarks/results/$(date -u +%F)-vm-dataplane.json}
[[ -n $smoke ]] && out=$work/smoke.json dp_out=$work/smoke-dataplane.json
# The data plane's shape: one Service in twenty a NodePort (the default range holds 2,768).
nodeport_every=0
[[ -n $dataplane ]] && nodeport_every=20
if [[ -n ${IPVSPROXY_BENCH_PREPARE_ONLY:-} ]]; then
	# Only the control plane and its objects, left running for later runs (no VM): creating
	# 30,000 Services takes the API server a long while on a loaded machine, time a run holding
	# the VM would spend idle.
	n=${sizes[-1]}
	((n <= have)) || kc bulk-services --from "$have" --count "$n" --endpoints 10 --nodeport-every "$nodeport_every" --workers 8 >&2
	trap - EXIT
	say "kept: IPVSPROXY_BENCH_CONTROLPLANE=$cp_dir IPVSPROXY_BENCH_HAVE=$n$([[ -n $dataplane ]] && echo " (the data plane's shape)"); stop it with e2e/controlplane/stop.sh $cp_dir"
	exit 0
fi
mkdir -p "$work/logs"
round=${IPVSPROXY_BENCH_ROUND:-0} rc=0
[[ $round =~ ^[0-9]+$ ]] && ((round <= 25)) || die "IPVSPROXY_BENCH_ROUND must be 0 to 25 (the endpoint change adds 10.244.255.(200 + round + side))"
for n in "${sizes[@]}"; do
	t=$SECONDS
	((n <= have)) || kc bulk-services --from "$have" --count "$n" --endpoints 10 --nodeport-every "$nodeport_every" --workers 8 >&2
	((n <= have)) || have=$n
	say "$n Services × 10 endpoints created ($((SECONDS - t))s)"
	t=$SECONDS
	set +e
	# The data plane's figures in the smoke are short runs of each measurement.
	dp_env=()
	[[ -n $smoke ]] && dp_env=(-e DP_CONNECTS=200 -e DP_HOLD=2000 -e DP_RATE_S=2 -e DP_IPERF_S=2 -e DP_UDP_S=2 -e DP_REPEAT=1)
	for v in DP_CONNECTS DP_HOLD DP_RATE_S DP_IPERF_S DP_UDP_S DP_REPEAT DP_PERF DP_PERF_S; do
		[[ -n ${!v:-} ]] && dp_env+=(-e "$v=${!v}")
	done
	# The host's load beside the guest's figures (each data-plane line has its time, "at"): under
	# emulation the guest's one vCPU is a host thread, slowed by whatever else runs here.
	mkdir -p "$work/results-$n"
	while :; do
		printf '%s\t%s\n' "$EPOCHSECONDS" "$(</proc/loadavg)"
		sleep 5
	done >"$work/results-$n/host-load.tsv" 2>/dev/null &
	load_sampler=$!
	n_big=0
	for b in $big_at; do ((b == n)) && n_big=$big; done
	IPVSPROXY_VM_PREPARED=1 "$here/run.sh" --mem "${IPVSPROXY_VM_MEM:-$([[ -n $dataplane ]] && echo 4096 || echo 3072)}" \
		--timeout "${IPVSPROXY_VM_TIMEOUT:-5400}" --results "$work/results-$n" --host-port "6443:$APISERVER_PORT" \
		-e "E2E_BIN=$run_bin" -e "IPVSPROXY=$repo/bin/ipvsproxy" -e "ECHOSERVER=$work/echoserver" \
		-e "LOADGEN=$work/loadgen" -e "NFTSERVICE=$work/nftservice" -e "PROMHIST=$work/promhist" \
		-e "ADMIN_KUBECONFIG=$cp_dir/admin-guest.kubeconfig" -e "PROXIER_KUBECONFIG=$cp_dir/proxier.kubeconfig" \
		-e "BENCH_N=$n" -e "BENCH_SIDES=$sides" -e "BENCH_OUT=$work/results-$n/figures.json" \
		-e "BENCH_LOGS=$work/results-$n" -e "BENCH_RESYNC=$([[ -n $control ]] && echo "$resync" || echo 0)" \
		-e "BENCH_SERIES=$series" -e "BENCH_SERIES_PAUSE=$series_pause" -e "BENCH_BIG=$n_big" -e "BENCH_BIG_TIMEOUT=${IPVSPROXY_BENCH_BIG_TIMEOUT:-1800}" \
		-e "BENCH_DATAPLANE=$([[ -n $dataplane ]] && echo 1)" -e "DP_OUT=$work/results-$n/dataplane.json" "${dp_env[@]}" \
		-e "BENCH_TIMEOUTS=${IPVSPROXY_BENCH_TIMEOUTS:-}" \
		-e "BENCH_ROUND=$round" -e "BENCH_HEAP=${IPVSPROXY_BENCH_HEAP:-}" -e "BENCH_CPU=${IPVSPROXY_BENCH_CPU:-}" -e "BENCH_TIMEOUT=${IPVSPROXY_BENCH_TIMEOUT:-1800}" -e "BENCH_CHANGES=${IPVSPROXY_BENCH_CHANGES:-0}" \
		-e "BENCH_WATCHLIST=${IPVSPROXY_BENCH_WATCHLIST:-}" -e "BENCH_IPVSPROXY_ENV=${IPVSPROXY_BENCH_ENV:-}" -e "IPVSPROXY_BASELINE=${IPVSPROXY_BENCH_BASELINE:-}" \
		-e "BENCH_IPVSPROXY_VARIANTS=${IPVSPROXY_BENCH_VARIANTS:-}" \
		-e "BENCH_CHURN=$churn" -e "BENCH_CHURN_SMOKE=$smoke" -e "ENDPOINTCHURN=$work/endpointchurn" \
		-- "$here/bench-daemon-guest.sh" >&2
	vm_rc=$?
	kill "$load_sampler" 2>/dev/null
	wait "$load_sampler" 2>/dev/null
	set -e
	round=$((round + 2))
	say "N=$n: VM run $((SECONDS - t))s, exit $vm_rc"
	((vm_rc == 0)) || rc=1
	if [[ -n $control && -f $work/results-$n/figures.json ]]; then cat "$work/results-$n/figures.json" >>"$out"; fi
	if [[ -n $dataplane && -f $work/results-$n/dataplane.json ]]; then cat "$work/results-$n/dataplane.json" >>"$dp_out"; fi
	# The guest's kernel profiles (DP_PERF=1), reported here with the guest's symbols: each
	# function's own share of the samples, and its share with what it called.
	for f in "$work/results-$n"/perf-*.data; do
		[[ -f $f && -f $work/results-$n/kallsyms ]] || continue
		perf report -i "$f" --kallsyms "$work/results-$n/kallsyms" --stdio --no-children --sort dso,sym -g none --percent-limit 0.2 >"${f%.data}-self.txt" 2>/dev/null
		perf report -i "$f" --kallsyms "$work/results-$n/kallsyms" --stdio --children --sort sym -g none --percent-limit 1 >"${f%.data}-children.txt" 2>/dev/null
	done
	# Each side's memory over its run (bench-daemon-guest.sh's sample_rss) and its churn's raw
	# samples beside the figures.
	if [[ -z $smoke ]]; then
		for f in "$work/results-$n"/rss-*.tsv "$work/results-$n"/churn-*.tsv; do
			[[ -f $f ]] && cp "$f" "${out%.json}-${f##*/}"
		done
		# The data plane's kernel profiles and the host's load beside its figures.
		if [[ -n $dataplane ]]; then
			for f in "$work/results-$n"/perf-*.txt; do
				[[ -f $f ]] && cp "$f" "${dp_out%.json}-${f##*/}"
			done
			[[ -f $work/results-$n/host-load.tsv ]] && cp "$work/results-$n/host-load.tsv" "${dp_out%.json}-host-load-$n.tsv"
		fi
	fi
done
say "whole run $((SECONDS - t_all))s; figures in $([[ -n $control ]] && echo "$out ")$([[ -n $dataplane ]] && echo "$dp_out")"
[[ -n $control && -f $out ]] && cat "$out"
[[ -n $dataplane && -f $dp_out ]] && cat "$dp_out"
if [[ -z $smoke ]]; then
	# The Markdown tables and the plots beside each JSON file (benchmarks/harness: each figure
	# against Services, a line per side).
	if [[ -n $control && -f $out ]]; then
		(cd "$repo/benchmarks/harness" && "$go" run ./cmd/daemonplot -o "${out%.json}" -md "${out%.json}.md" "$out") >&2 ||
			say "warning: the daemon tier's tables and plots were not made"
	fi
	if [[ -n $dataplane && -f $dp_out ]]; then
		(cd "$repo/benchmarks/harness" && "$go" run ./cmd/dataplaneplot -o "${dp_out%.json}" -md "${dp_out%.json}.md" "$dp_out") >&2 ||
			say "warning: the data plane's tables and plots were not made"
	fi
	if [[ -n $churn && -f $out ]]; then
		# The churn's table after the daemon tier's.
		{
			echo
			echo "Churn: endpoint changes over random Services, each side at its default sync periods; latency from the slice's trigger time to the new real server in the kernel (raw), and the side's own network_programming_duration_seconds over the window (p99 as its bucket's bound)."
			echo
			echo "| Services × 10 | side | changes/s | window s | changes | raw p50 / p90 / p99 / max s | over 1 s | histogram ≤ 1 s | histogram p99 ≤ s | re-checks | re-check mean s | partial syncs (mean s) | CPU s (per re-check) |"
			echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
			jq -r 'select(.churn != null) | .churn as $c | "| \(.services) | \(.side) | \($c.rate_per_s) | \($c.window_s) | \($c.changes) | \($c.raw_p50_s) / \($c.raw_p90_s) / \($c.raw_p99_s) / \($c.raw_max_s) | \($c.raw_over_1s) | \($c.hist_le_1s) of \($c.hist_count) | \($c.hist_p99_le_s) | \($c.rechecks) | \($c.recheck_mean_s) | \($c.partial_syncs) (\($c.partial_mean_s)) | \($c.cpu_s) (\($c.cpu_per_recheck_period_s)) |"' "$out"
		} >>"${out%.json}.md"
	fi
fi

if [[ -n $smoke && -n $control ]]; then
	# Every side ready, every Service (100 + the probe + default/kubernetes) programmed, each
	# figure present, the series counted by each side's histogram, the big Service programmed.
	for side in $sides; do
		line=$(grep "\"side\":\"$side\"" "$out" || true)
		[[ $line == *'"ok":true'* ]] || die "smoke: $side did not become ready or program the endpoint change"
		vs=$(jq -r '.programmed_services // 0' <<<"$line")
		((vs >= 101)) || die "smoke: $side programmed $vs Services, want at least 101"
		for f in peak_rss_mib ready_s connect_s endpoint_change_s cold_sync_s; do
			[[ $line =~ \"$f\":[0-9] ]] || die "smoke: $side has no $f: $line"
		done
		# With the data plane, kube-proxy's iptables mode runs the data plane only.
		[[ -n $dataplane && $side == kube-proxy-iptables ]] && continue
		jq -e --argjson n "$series" '.endpoint_series.count >= $n and .endpoint_series.p99 > 0' <<<"$line" >/dev/null ||
			die "smoke: $side's histogram did not count the $series changes of the series: $line"
		# kube-proxy's iptables mode has no kernel check here (bench-daemon-guest.sh skips it).
		jq -e --argjson e "$big" '.big.skipped != null or (.big.in_kernel == $e and .big.programmed_s > 0 and .big.touch_s > 0)' <<<"$line" >/dev/null ||
			die "smoke: $side did not program the Service of $big endpoints and the change beside it: $line"
		# The churn runs on the sides whose kernel state is IPVS (endpointchurn reads IPVS).
		if [[ -n $churn && $side != kube-proxy-nftables && $side != kube-proxy-iptables ]]; then
			jq -e '.churn != null and .churn.changes > 0 and .churn.write_errors == 0 and .churn.not_seen == 0 and .churn.hist_count > 0' <<<"$line" >/dev/null ||
				die "smoke: $side's churn did not bring every change to the kernel, or its histogram saw none: $line"
		fi
	done
	say "smoke passed"
fi
if [[ -n $smoke && -n $dataplane ]]; then
	# The baseline and every side produced every figure in both table states, with no failed
	# connection and every held connection open.
	for side in no-proxy $sides; do
		for table in empty held; do
			[[ $side == no-proxy && $table == held ]] && continue
			line=$(jq -c --arg s "$side" --arg t "$table" 'select(.side == $s and .table == $t)' "$dp_out")
			[[ -n $line ]] || die "smoke: no data-plane figures for $side ($table)"
			jq -e '[.connect[] | select(. == null or .n < 1 or .failed > 0)] == [] and .rate.per_s > 0 and .iperf_bits_per_s > 0 and .udp.per_s > 0' <<<"$line" >/dev/null ||
				die "smoke: $side ($table) is missing a figure or failed connections: $line"
			if [[ $table == held ]]; then
				jq -e '.held == 2000 and .conntrack_entries >= 2000' <<<"$line" >/dev/null || die "smoke: $side held fewer than 2000 connections: $line"
			fi
		done
	done
	say "data-plane smoke passed"
fi
exit "$rc"
