#!/usr/bin/env bash
# node-watch.sh — what a proxy pays for the cluster's Nodes, simulated on this host
# (docs/performance.md, "What watching the Nodes costs"). A real kube-apiserver holds N Nodes as
# kubelets register them (e2ectl bulk-nodes: 50 images, four conditions, labels, annotations,
# addresses, about as large as a cloud node's); during a window each Node's status is patched
# at kubelet's cadence (every 5 min, spread evenly) and conditions flip on random Nodes
# (e2ectl node-heartbeats). Watching meanwhile, each in a network namespace of its own with a
# veth to this host: the real ipvsproxy daemon on its Fakes (-tags fakekernel; its Node
# informers as shipped) and kube-proxy's own binary (nftables mode, as e2e/controlplane builds
# it), each taking the place of one of the Nodes. Per proxy: bytes it received over the window
# (its veth), its CPU time and memory; the API server's CPU time, memory and Node watch events
# sent (apiserver_watch_events_total) over the window, and the same window with the Nodes quiet.
#
#   e2e/sim/node-watch.sh [-n NODES] [-w WINDOW] [-c CHANGES] [-o OUT.json] [SIDES...]
#
# SIDES: ipvsproxy, kube-proxy (default both), ipvsproxy-K (K ipvsproxy daemons, for the API
# server's cost per watcher), ipvsproxy-published (the daemon with
# --node-addresses-from=endpointslices, beside one `ipvsproxy publish-node-addresses`, measured as
# the side publisher). -c: condition changes a minute (default 1% of the Nodes). OUT gets
# one JSON line per window (default benchmarks/results/<date>-sim-node-watch.json).
# Env: SIM_PORT (API server port, default 7843), IPVSPROXY_SIM_DAEMON (a daemon built with
# -tags fakekernel; default: built here), SIM_KEEP=1 keeps the control plane and its logs.
set -euo pipefail
sim_name=node-watch
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ $(id -u) == 0 ]] || die "run as root (network namespaces)"

nodes=5000 window=600 changes= out=
while getopts n:w:c:o: opt; do
	case $opt in
	n) nodes=$OPTARG ;;
	w) window=$OPTARG ;;
	c) changes=$OPTARG ;;
	o) out=$OPTARG ;;
	*) die "usage: node-watch.sh [-n NODES] [-w SECONDS] [-c CHANGES] [-o OUT] [SIDES...]" ;;
	esac
done
shift $((OPTIND - 1))
sides=("${@:-ipvsproxy kube-proxy}")
read -r -a sides <<<"${sides[*]}"
changes=${changes:-$((nodes / 100))}
out=${out:-$repo/benchmarks/results/$(date -u +%F)-sim-node-watch.json}

work=$(mktemp -d /var/tmp/ipvsproxy-sim.XXXXXX)
pids=() nss=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	for n in "${nss[@]}"; do sim_netns_del "${n%:*}" "${n#*:}"; done
	[[ -d $work/cp ]] && [[ -z ${SIM_KEEP:-} ]] && "$repo/e2e/controlplane/stop.sh" "$work/cp" >/dev/null 2>&1 && rm -rf "$work/cp.bin"
	[[ -z ${SIM_KEEP:-} ]] && rm -rf "$work"
	true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

daemon=${IPVSPROXY_SIM_DAEMON:-}
if [[ -z $daemon ]]; then
	daemon=$work/ipvsproxy-fakekernel
	sim_fake_daemon "$daemon"
fi
t=$SECONDS
sim_controlplane "$work/cp"
say "control plane up ($((SECONDS - t))s)"
t=$SECONDS
sim_kc bulk-nodes --count "$nodes" --workers 8 >&2
say "$nodes Nodes registered ($((SECONDS - t))s)"
node_bytes=$(curl -s --cacert "$sim_cp/pki/ca.crt" --cert "$sim_cp/pki/admin.crt" --key "$sim_cp/pki/admin.key" \
	-H 'Accept: application/vnd.kubernetes.protobuf' "https://127.0.0.1:$sim_port/api/v1/nodes/node-00000" | wc -c)
node_json=$(curl -s --cacert "$sim_cp/pki/ca.crt" --cert "$sim_cp/pki/admin.crt" --key "$sim_cp/pki/admin.key" \
	"https://127.0.0.1:$sim_port/api/v1/nodes/node-00000" | wc -c)
say "one Node: $node_bytes bytes as protobuf, $node_json as JSON"

# start WATCHER INDEX: one proxy in namespace sim-INDEX, standing for Node node-INDEX.
watchers=() ifs=()
start() {
	local side=$1 i=$2 ns=sim-$2 host_if kc
	host_if=$(sim_netns "$ns" "$i")
	nss+=("$ns:$host_if")
	kc=$work/kubeconfig-$i
	case $side in
	ipvsproxy | ipvsproxy-published)
		local from=()
		[[ $side == ipvsproxy-published ]] && from=(--node-addresses-from endpointslices --node-addresses-namespace default)
		sim_kubeconfig "$sim_cp/proxier-host.kubeconfig" "$kc" "$i"
		ip netns exec "$ns" "$daemon" run --kubeconfig "$kc" --hostname-override "$(printf 'node-%05d' "$i")" \
			--lock-file "$work/lock-$i" --cluster-cidr 10.244.0.0/16 "${from[@]}" >"$work/$side-$i.log" 2>&1 &
		;;
	publisher)
		# Cluster-wide: it writes slices, with the admin's rights here.
		sim_kubeconfig "$sim_cp/admin.kubeconfig" "$kc" "$i"
		ip netns exec "$ns" "$daemon" publish-node-addresses --kubeconfig "$kc" --namespace default >"$work/$side-$i.log" 2>&1 &
		;;
	kube-proxy)
		sim_kubeconfig "$sim_cp/admin.kubeconfig" "$kc" "$i"
		ip netns exec "$ns" "$E2E_BIN/kube-proxy" --proxy-mode=nftables --kubeconfig "$kc" \
			--hostname-override "$(printf 'node-%05d' "$i")" --cluster-cidr 10.244.0.0/16 \
			--conntrack-max-per-core=0 --conntrack-tcp-timeout-established=0 --conntrack-tcp-timeout-close-wait=0 \
			>"$work/$side-$i.log" 2>&1 &
		;;
	esac
	pids+=($!)
	watchers+=("$side:$i:$!")
	ifs+=("$host_if")
}

i=0
for s in "${sides[@]}"; do
	case $s in
	ipvsproxy-published) start publisher 255; start "$s" "$i"; i=$((i + 1)) ;;
	ipvsproxy-[0-9]*) for ((k = 0; k < ${s#ipvsproxy-}; k++)); do start ipvsproxy "$i"; i=$((i + 1)); done ;;
	*) start "$s" "$i"; i=$((i + 1)) ;;
	esac
done
# Each becomes ready: ipvsproxy's /readyz; kube-proxy's first sync.
ready() {
	local side=$1 i=$2
	case $side in
	ipvsproxy*) [[ $(ip netns exec "sim-$i" curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://127.0.0.1:10256/readyz) == 200 ]] ;;
	# The publisher has written every Node's addresses.
	publisher) grep -q 'Published the Nodes' "$work/$side-$i.log" ;;
	kube-proxy) ip netns exec "sim-$i" curl -s --max-time 5 http://127.0.0.1:10249/metrics | grep -q '^kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} [1-9]' ;;
	esac
}
for w in "${watchers[@]}"; do
	IFS=: read -r side i pid <<<"$w"
	deadline=$((SECONDS + 600))
	until ready "$side" "$i"; do
		kill -0 "$pid" 2>/dev/null || { tail -n 20 "$work/$side-$i.log" >&2; die "$side $i exited"; }
		((SECONDS < deadline)) || die "$side $i not ready in 600 s"
		sleep 1
	done
done
say "${#watchers[@]} proxies ready; settling 30 s"
sleep 30

# measure PHASE SECONDS [CMD...]: runs CMD (or sleeps) for SECONDS, then writes one JSON line
# per proxy and one for the API server.
measure() {
	local phase=$1 secs=$2
	shift 2
	local api rx0=() cpu0=() a_cpu0 a_ev0 a_sz0 t0 j w side i pid host_if rx1 cpu1 hb=""
	api=$(sim_apiserver_pid)
	for j in "${!watchers[@]}"; do
		IFS=: read -r side i pid <<<"${watchers[j]}"
		rx0[j]=$(sim_rx "${ifs[j]}") cpu0[j]=$(sim_cpu "$pid")
	done
	a_cpu0=$(sim_cpu "$api") a_ev0=$(sim_metric apiserver_watch_events_total 'resource="nodes"') a_sz0=$(sim_metric apiserver_watch_events_sizes_sum 'resource="nodes"')
	t0=$EPOCHREALTIME
	if (($# > 0)); then hb=$("$@"); else sleep "$secs"; fi
	local dt
	dt=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
	for j in "${!watchers[@]}"; do
		IFS=: read -r side i pid <<<"${watchers[j]}"
		rx1=$(sim_rx "${ifs[j]}") cpu1=$(sim_cpu "$pid")
		printf '{"sim":"node-watch","phase":"%s","nodes":%d,"side":"%s","index":%d,"seconds":%s,"received_bytes":%d,"received_bytes_per_s":%.1f,"cpu_s":%.2f,"rss_mib":%.1f,"peak_rss_mib":%.1f}\n' \
			"$phase" "$nodes" "$side" "$i" "$dt" "$((rx1 - rx0[j]))" "$(awk -v b="$((rx1 - rx0[j]))" -v t="$dt" 'BEGIN { print b / t }')" \
			"$(awk -v a="${cpu0[j]}" -v b="$cpu1" 'BEGIN { print b - a }')" "$(awk -v k="$(sim_mem "$pid" VmRSS)" 'BEGIN { print k / 1024 }')" \
			"$(awk -v k="$(sim_mem "$pid" VmHWM)" 'BEGIN { print k / 1024 }')" | tee -a "$out" >&2
	done
	printf '{"sim":"node-watch","phase":"%s","nodes":%d,"side":"kube-apiserver","watchers":%d,"seconds":%s,"cpu_s":%.2f,"rss_mib":%.1f,"node_watch_events":%d,"node_watch_event_bytes":%d,"node_bytes_protobuf":%d,"node_bytes_json":%d,"writes":%s}\n' \
		"$phase" "$nodes" "${#watchers[@]}" "$dt" "$(awk -v a="$a_cpu0" -v b="$(sim_cpu "$api")" 'BEGIN { print b - a }')" \
		"$(awk -v k="$(sim_mem "$api" VmRSS)" 'BEGIN { print k / 1024 }')" \
		"$(($(sim_metric apiserver_watch_events_total 'resource="nodes"') - a_ev0))" "$(($(sim_metric apiserver_watch_events_sizes_sum 'resource="nodes"') - a_sz0))" \
		"$node_bytes" "$node_json" "${hb:-null}" | tee -a "$out" >&2
}

say "quiet window (${window}s): the Nodes unchanged"
measure quiet "$window"
say "kubelet window (${window}s): every Node's status every 5 min, $changes condition changes a minute"
measure kubelet "$window" sim_kc node-heartbeats --count "$nodes" --report-period 5m --condition-changes "$changes" --duration "${window}s"
say "figures in $out"
