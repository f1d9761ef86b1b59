#!/usr/bin/env bash
# fleet-start.sh — a fleet of proxies starting at once against one API server, simulated on this
# host (docs/performance.md, "A fleet starting at once"). A real kube-apiserver holds N Services ×
# 10 endpoints (e2ectl bulk-services, or a control plane kept from an earlier run); K proxies, each
# in a network namespace of its own standing for one Node, are started within SPREAD seconds: the
# ipvsproxy daemon on its Fakes (-tags fakekernel), or kube-proxy's own binary in nftables mode.
# Per proxy: seconds to ready (ipvsproxy's /readyz; kube-proxy's first sync), peak RSS, CPU time,
# bytes received. For the API server, sampled every second until every proxy is ready: CPU,
# memory, and over the start the latency of the proxies' lists (apiserver_request_duration_seconds
# for a LIST, apiserver_watch_list_duration_seconds for client-go's streamed list, of Services,
# EndpointSlices and Nodes: their buckets' bound at p50 and p99).
#
#   e2e/sim/fleet-start.sh [-k PROXIES] [-s SPREAD] [-n SERVICES] [-o OUT.json] SIDE
#
# SIDE: ipvsproxy or kube-proxy. Env: SIM_CONTROLPLANE (a kept control plane's directory holding
# the Services; default: a new one, N created), SIM_PORT, IPVSPROXY_SIM_DAEMON (see node-watch.sh),
# SIM_DAEMON_ARGS (more flags for every ipvsproxy), SIM_KEEP=1.
set -euo pipefail
sim_name=fleet-start
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ $(id -u) == 0 ]] || die "run as root (network namespaces)"

proxies=200 spread=10 services=10000 out=
while getopts k:s:n:o: opt; do
	case $opt in
	k) proxies=$OPTARG ;;
	s) spread=$OPTARG ;;
	n) services=$OPTARG ;;
	o) out=$OPTARG ;;
	*) die "usage: fleet-start.sh [-k PROXIES] [-s SPREAD] [-n SERVICES] [-o OUT] ipvsproxy|kube-proxy" ;;
	esac
done
shift $((OPTIND - 1))
side=${1:?the side: ipvsproxy or kube-proxy}
((proxies <= 250)) || die "at most 250 proxies (a /30 each in 10.253.0.0/16)"
out=${out:-$repo/benchmarks/results/$(date -u +%F)-sim-fleet-start.json}

work=$(mktemp -d /var/tmp/ipvsproxy-sim.XXXXXX)
pids=() nss=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	for n in "${nss[@]}"; do sim_netns_del "${n%:*}" "${n#*:}"; done
	if [[ -z ${SIM_CONTROLPLANE:-} && -d $work/cp && -z ${SIM_KEEP:-} ]]; then
		"$repo/e2e/controlplane/stop.sh" "$work/cp" >/dev/null 2>&1
	fi
	[[ -z ${SIM_KEEP:-} ]] && rm -rf "$work"
	true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

daemon=${IPVSPROXY_SIM_DAEMON:-}
if [[ $side == ipvsproxy && -z $daemon ]]; then
	daemon=$work/ipvsproxy-fakekernel
	sim_fake_daemon "$daemon"
fi
if [[ -n ${SIM_CONTROLPLANE:-} ]]; then
	sim_cp=$SIM_CONTROLPLANE
	sim_port=$(sed -n 's|^ *server: https://127.0.0.1:\([0-9]*\)$|\1|p' "$sim_cp/admin.kubeconfig")
	E2E_BIN=$(sed -n 's/^E2E_BIN=//p' "$sim_cp/env")
	export KUBECONFIG=$sim_cp/admin.kubeconfig
else
	sim_controlplane "$work/cp"
	t=$SECONDS
	sim_kc bulk-services --count "$services" --endpoints 10 --workers 8 >&2
	say "$services Services created ($((SECONDS - t))s)"
fi
# The Nodes the proxies stand for.
sim_kc bulk-nodes --count "$proxies" --workers 8 >&2

# Every proxy's namespace first: creating them is not the proxies' start.
hosts=()
for ((i = 0; i < proxies; i++)); do
	hosts[i]=$(sim_netns "sim-$i" "$i")
	nss+=("sim-$i:${hosts[i]}")
	if [[ $side == ipvsproxy ]]; then
		sim_kubeconfig "$sim_cp/proxier-host.kubeconfig" "$work/kc-$i" "$i"
	else
		sim_kubeconfig "$sim_cp/admin.kubeconfig" "$work/kc-$i" "$i"
	fi
done

api=$(sim_apiserver_pid)
snapshot_latency() {
	curl -s --cacert "$sim_cp/pki/ca.crt" --cert "$sim_cp/pki/admin.crt" --key "$sim_cp/pki/admin.key" \
		"https://127.0.0.1:$sim_port/metrics" | grep -E '^(apiserver_request_duration_seconds_bucket\{.*resource="(services|endpointslices|nodes)".*verb="LIST"|apiserver_watch_list_duration_seconds_bucket\{.*resource="(services|endpointslices|nodes)")' >"$1" || true
}
snapshot_latency "$work/latency-before.txt"
cpu0=$(sim_cpu "$api")
rx0=()
for ((i = 0; i < proxies; i++)); do rx0[i]=$(sim_rx "${hosts[i]}"); done

t0=$EPOCHREALTIME
starts=()
for ((i = 0; i < proxies; i++)); do
	node=$(printf 'node-%05d' "$i")
	case $side in
	ipvsproxy)
		# shellcheck disable=SC2086 # SIM_DAEMON_ARGS are words
		ip netns exec "sim-$i" "$daemon" run --kubeconfig "$work/kc-$i" --hostname-override "$node" \
			--lock-file "$work/lock-$i" --cluster-cidr 10.244.0.0/16 --v 2 ${SIM_DAEMON_ARGS:-} >"$work/$side-$i.log" 2>&1 &
		;;
	kube-proxy)
		ip netns exec "sim-$i" "$E2E_BIN/kube-proxy" --proxy-mode=nftables --kubeconfig "$work/kc-$i" \
			--hostname-override "$node" --cluster-cidr 10.244.0.0/16 \
			--conntrack-max-per-core=0 --conntrack-tcp-timeout-established=0 --conntrack-tcp-timeout-close-wait=0 --v=2 \
			>"$work/$side-$i.log" 2>&1 &
		;;
	esac
	pids[i]=$!
	starts[i]=$EPOCHREALTIME
	# Spread over SPREAD seconds, as a DaemonSet's pods start across a fleet.
	sleep "$(awk -v s="$spread" -v k="$proxies" 'BEGIN { printf "%.3f", s / k }')"
done
say "$proxies ${side}s started in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s"

# ready I: the proxy's first sync has ended (ipvsproxy's first full sync, what /readyz waits for;
# kube-proxy's first), read from its log at --v=2 rather than by entering each namespace every
# second: the polling's own processes would take the CPU the fleet starts on. It prints the time
# of day the log gives, in seconds.
ready() {
	local pattern='Sync finished.*full=true'
	[[ $side == kube-proxy ]] && pattern='SyncProxyRules complete'
	grep -m1 -E "$pattern" "$work/$side-$1.log" 2>/dev/null | awk '{ split($2, t, ":"); printf "%.6f\n", t[1] * 3600 + t[2] * 60 + t[3] }' | grep .
}
# daytime EPOCH: seconds since midnight UTC (klog's clock in this host's zone, UTC).
daytime() { awk -v e="$1" 'BEGIN { printf "%.6f", e - int(e / 86400) * 86400 }'; }
readies=() left=$proxies api_peak_rss=0 samples=0 api_cpu_peak=0 last_cpu=$cpu0 last_t=$t0
deadline=$((SECONDS + ${SIM_TIMEOUT:-3600}))
while ((left > 0 && SECONDS < deadline)); do
	for ((i = 0; i < proxies; i++)); do
		[[ -n ${readies[i]:-} ]] && continue
		if r=$(ready "$i"); then
			readies[i]=$r
			left=$((left - 1))
		elif ! kill -0 "${pids[i]}" 2>/dev/null; then
			readies[i]=exited
			left=$((left - 1))
			say "proxy $i exited: $(tail -n 2 "$work/$side-$i.log" | tr '\n' ' ')"
		fi
	done
	rss=$(sim_mem "$api" VmRSS)
	((rss > api_peak_rss)) && api_peak_rss=$rss
	now_cpu=$(sim_cpu "$api") now_t=$EPOCHREALTIME
	api_cpu_peak=$(awk -v p="$api_cpu_peak" -v c0="$last_cpu" -v c1="$now_cpu" -v t0="$last_t" -v t1="$now_t" 'BEGIN { r = (c1 - c0) / (t1 - t0); print (r > p) ? r : p }')
	last_cpu=$now_cpu last_t=$now_t
	sleep 2
done
t_end=$EPOCHREALTIME
snapshot_latency "$work/latency-after.txt"
api_cpu=$(awk -v a="$cpu0" -v b="$(sim_cpu "$api")" 'BEGIN { printf "%.1f", b - a }')

# Per proxy: time to ready from its own start, peak RSS, CPU, bytes received.
for ((i = 0; i < proxies; i++)); do
	r=${readies[i]:-}
	rt=null
	[[ -n $r && $r != exited ]] && rt=$(awk -v a="$(daytime "${starts[i]}")" -v b="$r" 'BEGIN { d = b - a; if (d < -43200) d += 86400; printf "%.2f", d }')
	printf '{"sim":"fleet-start","side":"%s","proxies":%d,"services":%d,"spread_s":%s,"index":%d,"ready_s":%s,"peak_rss_mib":%.1f,"cpu_s":%s,"received_bytes":%d}\n' \
		"$side" "$proxies" "$services" "$spread" "$i" "$rt" "$(awk -v k="$(sim_mem "${pids[i]}" VmHWM 2>/dev/null || echo 0)" 'BEGIN { print k / 1024 }')" \
		"$(sim_cpu "${pids[i]}" 2>/dev/null || echo null)" "$(($(sim_rx "${hosts[i]}") - rx0[i]))"
done >"$work/proxies.json"

# The latency of the proxies' LIST and WATCH requests over the start: each resource and verb's
# count, and the bucket bounds holding p50 and p99.
latency=$(awk '
	FNR == NR { before[$1] = $2; next }
	{
		match($1, /resource="[^"]*"/); r = substr($1, RSTART + 10, RLENGTH - 11)
		v = "WATCHLIST"
		if (match($1, /verb="[^"]*"/)) v = substr($1, RSTART + 6, RLENGTH - 7)
		match($1, /le="[^"]*"/); le = substr($1, RSTART + 4, RLENGTH - 5)
		k = r " " v; n[k, le] += $2 - before[$1]; les[le] = 1; keys[k] = 1
	}
	END {
		out = ""
		for (k in keys) {
			total = n[k, "+Inf"]; if (total <= 0) continue
			split("", sorted); m = 0
			for (le in les) if (le != "+Inf") sorted[++m] = le + 0
			for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++) if (sorted[b] < sorted[a]) { x = sorted[a]; sorted[a] = sorted[b]; sorted[b] = x }
			p50 = "null"; p99 = "null"
			for (a = 1; a <= m; a++) {
				c = n[k, sprintf("%g", sorted[a])]
				if (p50 == "null" && c >= 0.5 * total) p50 = sorted[a]
				if (p99 == "null" && c >= 0.99 * total) p99 = sorted[a]
			}
			split(k, kv, " ")
			out = out (out == "" ? "" : ",") sprintf("{\"resource\":\"%s\",\"verb\":\"%s\",\"count\":%d,\"p50_le_s\":%s,\"p99_le_s\":%s}", kv[1], kv[2], total, p50, p99)
		}
		print "[" out "]"
	}' "$work/latency-before.txt" "$work/latency-after.txt")

jq -s --arg side "$side" --argjson services "$services" --argjson spread "$spread" --argjson api_cpu "$api_cpu" \
	--argjson api_peak "$(awk -v k="$api_peak_rss" 'BEGIN { print k / 1024 }')" --argjson api_cpu_peak "$api_cpu_peak" \
	--argjson window "$(awk -v a="$t0" -v b="$t_end" 'BEGIN { printf "%.1f", b - a }')" --argjson latency "$latency" '
	def q(p): (map(select(.ready_s != null)) | sort_by(.ready_s)) as $r | if ($r | length) == 0 then null else $r[((($r | length) - 1) * p | floor)].ready_s end;
	{sim: "fleet-start", side: $side, proxies: length, ready: (map(select(.ready_s != null)) | length), services: $services,
	 spread_s: $spread, window_s: $window, ready_p50_s: q(0.5), ready_p90_s: q(0.9), ready_max_s: q(1),
	 proxy_peak_rss_mib_max: (map(.peak_rss_mib) | max), proxy_cpu_s_mean: ((map(.cpu_s // 0) | add) / length),
	 proxy_received_mib_mean: ((map(.received_bytes) | add) / length / 1048576),
	 apiserver_cpu_s: $api_cpu, apiserver_cpu_cores_peak: $api_cpu_peak, apiserver_peak_rss_mib: $api_peak,
	 request_latency: $latency}' "$work/proxies.json" | tee -a "$out" >&2
cat "$work/proxies.json" >>"${out%.json}-proxies.json"
say "figures in $out (each proxy's in ${out%.json}-proxies.json)"
