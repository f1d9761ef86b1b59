# bench-dataplane-guest.sh — the data-plane tier's half of the daemon tier's guest script
# (bench-daemon-guest.sh sources it when BENCH_DATAPLANE=1): what a packet pays through each
# proxy's kernel state with N Services programmed. Measured in the VM, with the proxy's
# process stopped (SIGSTOP) once it has programmed the kernel, so that its periodic syncs (a
# kube-proxy IPVS sync at 10,000 Services takes the one vCPU for most of a minute) do not
# compete with the packets: the figures are the kernel path's.
#
# The topology, beside the node namespace of bench-daemon-guest.sh:
#   bench-pod     the server pod (203.0.113.10): every address of 10.244.0.0/16 is local to it
#                 (a local route), so each bulk Service's ten endpoints are real; the HTTP echo
#                 on 8080, the UDP echo on 8081, iperf3 on 5201, and on 9090 a listener that
#                 never accepts (loadgen sink) for the held connections.
#   bench-client  the client pod, 10.245.0.10-13 in the cluster CIDR (10.244.0.0/15), wired as
#                 Calico wires a pod: no address on the node's end, a /32 route and proxy ARP,
#                 so that the node has no more local addresses than before (the IPVS proxies
#                 make a NodePort virtual server per local address).
#   the VM's root namespace is "outside": it reaches NodePorts on 198.51.100.10.
#
# Per side and table state (empty, then with DP_HOLD connections held through the side's own
# hold Service, the tables of conntrack and, for IPVS, its own connection table near full):
#   connect      TCP connect time, DP_CONNECTS connections one at a time, pod -> the cluster IP
#                and outside -> the NodePort of the Service programmed first and of the one
#                programmed last (creation order; for kube-proxy's iptables mode, the first and
#                the last rule of KUBE-SERVICES and KUBE-NODEPORTS, its linear walk's best and
#                worst case, read after the process is stopped);
#   rate         new connections per second pod -> the last cluster IP, 4 connectors, DP_RATE_S
#                seconds, and the guest's CPU per connection;
#   iperf        one established flow's throughput (iperf3, DP_IPERF_S seconds) pod -> iperf's IP;
#   udp          UDP request/response rate pod -> udp's IP, a new source port each (DP_UDP_S s).
# dp_baseline measures the same with no proxy at all, pod -> pod, before the first side.
# Environment: LOADGEN, DP_CONNECTS (2000), DP_HOLD (100000; 0: no held state), DP_RATE_S (10),
# DP_IPERF_S (5), DP_UDP_S (5), DP_OUT (a JSON line per side, N and table state),
# DP_REPEAT (3): rate, iperf and udp each measured that many times, in turns (rate, iperf, udp,
# rate, ...), the figure the median sample, every sample's rate in *_samples: under emulation a
# 2-s sample moves by a third from one to the next, with the host's load;
# DP_PERF=1: after the figures of the empty tables, a kernel profile of the whole guest
# (perf record -a -g, the cpu-clock event: the emulated CPU has no counters) over one more rate,
# iperf and udp run each (perf-SIDE-N-empty-{rate,iperf,udp}.data in BENCH_LOGS, with the
# guest's kallsyms; bench-daemon.sh reports them by symbol, self and with children): what each
# figure's CPU went to, the proxy's rules and IPVS among the rest of the stack.

readonly dp_client=bench-client dp_client_addrs=(10.245.0.10 10.245.0.11 10.245.0.12 10.245.0.13)
readonly dp_link_gw=169.254.1.1

# dp_topology_up: the server pod's extra listeners and the client pod; called after node_up.
dp_topology_up() {
	ip -n bench-pod route add local 10.244.0.0/16 dev lo
	ip -n "$node" route add 10.244.0.0/16 via "$pod_addr"
	# Up to DP_HOLD connections wait in the sink's queue, never accepted.
	ip netns exec bench-pod sysctl -qw net.core.somaxconn=262144 net.ipv4.tcp_max_syn_backlog=262144
	ip netns exec bench-pod "$LOADGEN" sink -listen :9090 -ready /run/bench-sink.ready >"$BENCH_LOGS/sink.log" 2>&1 &
	echo $! >/run/bench-sink.pid
	ip netns exec bench-pod iperf3 -s -p 5201 >"$BENCH_LOGS/iperf3-server.log" 2>&1 &
	echo $! >/run/bench-iperf3.pid
	ip netns add "$dp_client"
	ip -n "$node" link add vcli type veth peer name eth0 netns "$dp_client"
	ip -n "$node" link set vcli up
	ip netns exec "$node" sysctl -qw net.ipv4.conf.vcli.proxy_arp=1
	local a
	for a in "${dp_client_addrs[@]}"; do
		ip -n "$dp_client" addr add "$a/32" dev eth0
		ip -n "$node" route add "$a/32" dev vcli
	done
	ip -n "$dp_client" link set eth0 up
	ip -n "$dp_client" link set lo up
	ip -n "$dp_client" route add "$dp_link_gw" dev eth0 scope link
	ip -n "$dp_client" route add default via "$dp_link_gw" src "${dp_client_addrs[0]}"
	# The gateway's address is nobody's: its MAC is the node end's, written once (proxy ARP
	# would answer too, but only while the node has a route to it out of another link).
	ip -n "$dp_client" neigh replace "$dp_link_gw" lladdr "$(ip -n "$node" -br link show vcli | awk '{ print $3 }')" dev eth0 nud permanent
	ip netns exec "$dp_client" sysctl -qw net.ipv4.ip_local_port_range="1024 65535"
	# The outside (the VM's root namespace) reaches the pods for the baseline.
	ip route replace 10.244.0.0/16 via "$node_addr"
	ip route replace 10.245.0.0/24 via "$node_addr"
	local deadline=$((SECONDS + 30))
	until [[ -f /run/bench-sink.ready ]] && ip netns exec bench-pod ss -Hltn 'sport = :5201' | grep -q .; do
		((SECONDS < deadline)) || { echo "the sink or iperf3 did not listen" >&2; return 1; }
		sleep 0.2
	done
}

dp_topology_down() {
	local f
	for f in /run/bench-sink.pid /run/bench-iperf3.pid; do
		[[ -f $f ]] && kill "$(<"$f")" 2>/dev/null
		rm -f "$f"
	done
	rm -f /run/bench-sink.ready
	ip netns del "$dp_client" 2>/dev/null
	ip route del 10.244.0.0/16 2>/dev/null
	ip route del 10.245.0.0/24 2>/dev/null
}

# settle: wait until the guest is idle (under 15% busy over a second, twice in a row, at most
# 120 s): the kernel tears a namespace's tables and connections down in the background, and a
# measurement must not start inside that.
settle() {
	local b0 b1 t0 t1 quiet=0 deadline=$((SECONDS + 120)) name user nice system idle iowait irq softirq steal
	while ((quiet < 2 && SECONDS < deadline)); do
		read -r name user nice system idle iowait irq softirq steal _ </proc/stat
		b0=$((user + nice + system + irq + softirq + steal)) t0=$((b0 + idle + iowait))
		snooze 1
		read -r name user nice system idle iowait irq softirq steal _ </proc/stat
		b1=$((user + nice + system + irq + softirq + steal)) t1=$((b1 + idle + iowait))
		if (((b1 - b0) * 100 < 15 * (t1 - t0))); then quiet=$((quiet + 1)); else quiet=0; fi
	done
}

# dp_service_targets: the Services whose paths are timed, as KEY=VALUE lines for eval
# (CIP_FIRST, CIP_LAST, NP_FIRST, NP_LAST as ADDR:PORT, and the Services' names): creation
# order, or, for kube-proxy's iptables mode, its chains' order.
dp_service_targets() {
	local first last
	if [[ $side == kube-proxy-iptables ]]; then
		# -A KUBE-SERVICES -d 10.96.0.5/32 -p tcp -m comment --comment "bench/svc-7:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-…
		ip netns exec "$node" iptables -w -t nat -S KUBE-SERVICES | awk '
			/--comment "bench\/svc-[0-9]+:http cluster IP"/ {
				for (i = 1; i <= NF; i++) { if ($i == "-d") a = $(i + 1); if ($i == "--dport") p = $(i + 1) }
				match($0, /bench\/svc-[0-9]+/); s = substr($0, RSTART, RLENGTH); sub("/32", "", a)
				if (!n++) printf "CIP_FIRST=%s:%s\nCIP_FIRST_SVC=%s\n", a, p, s
				la = a; lp = p; ls = s
			}
			END { printf "CIP_LAST=%s:%s\nCIP_LAST_SVC=%s\nCIP_RULES=%d\n", la, lp, ls, n }'
		# -A KUBE-NODEPORTS -p tcp -m comment --comment "bench/svc-20:http" -m tcp --dport 30020 -j KUBE-EXT-…
		ip netns exec "$node" iptables -w -t nat -S KUBE-NODEPORTS | awk -v node="$node_addr" '
			/--comment "bench\/svc-[0-9]+:http"/ {
				for (i = 1; i <= NF; i++) if ($i == "--dport") p = $(i + 1)
				match($0, /bench\/svc-[0-9]+/); s = substr($0, RSTART, RLENGTH)
				if (!n++) printf "NP_FIRST=%s:%s\nNP_FIRST_SVC=%s\n", node, p, s
				lp = p; ls = s
			}
			END { printf "NP_LAST=%s:%s\nNP_LAST_SVC=%s\nNP_RULES=%d\n", node, lp, ls, n }'
		return
	fi
	first=bench/svc-0 last=bench/svc-$((BENCH_N - 1))
	echo "CIP_FIRST=$dp_cip_first:80" "CIP_FIRST_SVC=$first" "CIP_LAST=$dp_cip_last:80" "CIP_LAST_SVC=$last" | tr ' ' '\n'
	echo "NP_FIRST=$node_addr:$dp_np_first" "NP_FIRST_SVC=$first" "NP_LAST=$node_addr:$dp_np_last" "NP_LAST_SVC=bench/svc-$dp_np_last_index" | tr ' ' '\n'
}

# dp_lookup_services: the addresses dp_service_targets and the measurements need, read once.
dp_lookup_services() {
	local CLUSTER_IP NODE_PORT_HTTP NODE_PORT_P
	dp_np_last_index=$(((BENCH_N - 1) / 20 * 20))
	eval "$(kc service-info bench/svc-0 | grep -E '^(CLUSTER_IP|NODE_PORT_HTTP)=')"
	dp_cip_first=$CLUSTER_IP dp_np_first=$NODE_PORT_HTTP
	eval "$(kc service-info "bench/svc-$((BENCH_N - 1))" | grep '^CLUSTER_IP=')"
	dp_cip_last=$CLUSTER_IP
	eval "$(kc service-info "bench/svc-$dp_np_last_index" | grep '^NODE_PORT_HTTP=')"
	dp_np_last=$NODE_PORT_HTTP
	eval "$(kc service-info dataplane/iperf | grep '^CLUSTER_IP=')"
	dp_iperf_ip=$CLUSTER_IP
	eval "$(kc service-info dataplane/udp | grep '^CLUSTER_IP=')"
	dp_udp_ip=$CLUSTER_IP
	eval "$(kc service-info dataplane/hold | grep '^CLUSTER_IP=')"
	dp_hold_ip=$CLUSTER_IP
	[[ $dp_np_first =~ ^[1-9] && $dp_np_last =~ ^[1-9] && -n $dp_cip_first && -n $dp_cip_last && -n $dp_iperf_ip && -n $dp_udp_ip && -n $dp_hold_ip ]] || {
		echo "data plane: the Services' addresses are missing (svc-0 NodePort $dp_np_first, svc-$dp_np_last_index NodePort $dp_np_last)" >&2
		return 1
	}
}

# dp_rate TO [SECONDS], dp_iperf TO [SECONDS], dp_udp TO [SECONDS]: one sample each from the
# client pod (loadgen's JSON; iperf3's received bits per second), null when it failed.
dp_rate() { ip netns exec "$dp_client" "$LOADGEN" rate -to "$1" -duration "${2:-${DP_RATE_S:-10}}s" -workers 4 || echo null; }
dp_udp() { ip netns exec "$dp_client" "$LOADGEN" udp -to "$1" -duration "${2:-${DP_UDP_S:-5}}s" -timeout 1s || echo null; }
dp_iperf() {
	local out bps
	out=$(ip netns exec "$dp_client" iperf3 -c "${1%:*}" -p "${1##*:}" -t "${2:-${DP_IPERF_S:-5}}" -J 2>>"$BENCH_LOGS/iperf3-client.log")
	bps=$(jq -r '.end.sum_received.bits_per_second // empty' <<<"$out" 2>/dev/null)
	[[ -n $bps ]] || { echo "$out" >>"$BENCH_LOGS/iperf3-client.log"; bps=null; }
	echo "$bps"
}

# dp_median FIELD SAMPLE...: the sample whose FIELD is the median (the lower one of an even
# count), null without one; dp_samples FIELD SAMPLE...: every sample's FIELD as a JSON list.
dp_median() {
	local f=$1
	shift
	printf '%s\n' "$@" | jq -sc --arg f "$f" 'map(select(type == "object" and .[$f] != null)) | sort_by(.[$f]) | if length == 0 then null else .[(length - 1) / 2 | floor] end'
}
dp_samples() {
	local f=$1
	shift
	printf '%s\n' "$@" | jq -sc --arg f "$f" 'map(if type == "object" then .[$f] else . end)'
}

# dp_round WHO TABLE CIP_FIRST CIP_LAST NP_FIRST NP_LAST IPERF UDP EXTRA_JSON: one table state's
# measurements; prints the JSON line.
dp_round() {
	local who=$1 table=$2 cf=$3 cl=$4 nf=$5 nl=$6 iperf_to=$7 udp_to=$8 extra=$9
	local c_cf c_cl c_nf c_nl rate iperf udp k rates=() iperfs=() udps=() at
	at=$(now)
	c_cf=$(ip netns exec "$dp_client" "$LOADGEN" connect -to "$cf" -n "${DP_CONNECTS:-2000}") || c_cf=null
	c_cl=$(ip netns exec "$dp_client" "$LOADGEN" connect -to "$cl" -n "${DP_CONNECTS:-2000}") || c_cl=null
	c_nf=$("$LOADGEN" connect -to "$nf" -n "${DP_CONNECTS:-2000}") || c_nf=null
	c_nl=$("$LOADGEN" connect -to "$nl" -n "${DP_CONNECTS:-2000}") || c_nl=null
	for ((k = 0; k < ${DP_REPEAT:-3}; k++)); do
		rates+=("$(dp_rate "$cl")")
		iperfs+=("$(dp_iperf "$iperf_to")")
		udps+=("$(dp_udp "$udp_to")")
	done
	rate=$(dp_median per_s "${rates[@]}")
	udp=$(dp_median per_s "${udps[@]}")
	iperf=$(printf '%s\n' "${iperfs[@]}" | jq -s 'map(select(type == "number")) | sort | if length == 0 then null else .[(length - 1) / 2 | floor] end')
	if ((${DP_REPEAT:-3} > 1)); then
		extra+=",\"repeat\":${DP_REPEAT:-3},\"rate_samples_per_s\":$(dp_samples per_s "${rates[@]}"),\"iperf_samples_bits_per_s\":$(printf '%s\n' "${iperfs[@]}" | jq -sc .),\"udp_samples_per_s\":$(dp_samples per_s "${udps[@]}")"
	fi
	printf '{"side":"%s","services":%d,"table":"%s","at":%.0f%s,"connect":{"pod_clusterip_first":%s,"pod_clusterip_last":%s,"outside_nodeport_first":%s,"outside_nodeport_last":%s},"rate":%s,"iperf_bits_per_s":%s,"udp":%s}\n' \
		"$who" "$BENCH_N" "$table" "$at" "$extra" "${c_cf:-null}" "${c_cl:-null}" "${c_nf:-null}" "${c_nl:-null}" "${rate:-null}" "${iperf:-null}" "${udp:-null}"
}

# dp_profile WHO TABLE CIP IPERF UDP: with DP_PERF=1, the guest's kernel profile over one more
# rate, iperf and udp run each (see the header). A missing perf is said, not fatal.
dp_profile() {
	[[ ${DP_PERF:-} == 1 ]] || return 0
	local who=$1 table=$2 cip=$3 iperf_to=$4 udp_to=$5 what base
	command -v perf >/dev/null || { log "no perf in the guest: no profile"; return 0; }
	for what in rate iperf udp; do
		base=$BENCH_LOGS/perf-$who-$BENCH_N-$table-$what
		local run=()
		case $what in
		rate) run=("$LOADGEN" rate -to "$cip" -duration "${DP_PERF_S:-3}s" -workers 4) ;;
		iperf) run=(iperf3 -c "${iperf_to%:*}" -p "${iperf_to##*:}" -t "${DP_PERF_S:-3}" -J) ;;
		udp) run=("$LOADGEN" udp -to "$udp_to" -duration "${DP_PERF_S:-3}s" -timeout 1s) ;;
		esac
		perf record -q -e cpu-clock -F 499 -a -g -o "$base.data" -- ip netns exec "$dp_client" "${run[@]}" >"$base.json" 2>"$base.log"
	done
	# Reported on the host after the run (bench-daemon.sh), with this kernel's symbols: perf
	# report takes the emulated CPU for minutes.
	[[ -f $BENCH_LOGS/kallsyms ]] || cat /proc/kallsyms >"$BENCH_LOGS/kallsyms"
	log "kernel profiles: $BENCH_LOGS/perf-$who-$BENCH_N-$table-*.data"
}

# dp_baseline: the same paths with no proxy: pod -> pod and outside -> pod, in a node
# namespace no proxy has touched. Where a proxy's figure is this one, the emulator dominates it.
dp_baseline() {
	side=no-proxy
	node_up
	dp_topology_up || { node_down; return 1; }
	settle
	log "pod to pod, no proxy"
	dp_round no-proxy empty "10.244.0.1:8080" "10.244.39.15:8080" "10.244.0.1:8080" "10.244.39.15:8080" "$pod_addr:5201" "$pod_addr:8081" \
		',"path":"pod to pod and outside to pod, no Service"' | tee -a "$DP_OUT" >&2
	dp_profile no-proxy empty "10.244.39.15:8080" "$pod_addr:5201" "$pod_addr:8081"
	dp_topology_down
	node_down
}

# dp_side: the side's measurements, its process ($pid) stopped throughout.
dp_side() {
	local CIP_FIRST CIP_LAST NP_FIRST NP_LAST CIP_FIRST_SVC CIP_LAST_SVC NP_FIRST_SVC NP_LAST_SVC CIP_RULES=0 NP_RULES=0
	local hold_pid extra held ct ipvs_conns t tab
	kill -STOP "$pid"
	eval "$(dp_service_targets)"
	[[ $CIP_FIRST == *:* && $NP_LAST == *:[1-9]* ]] || { log "data plane: no Services to time ($CIP_FIRST, $NP_LAST)"; kill -CONT "$pid"; return 1; }
	extra=$(printf ',"first_clusterip_service":"%s","last_clusterip_service":"%s","first_nodeport_service":"%s","last_nodeport_service":"%s"' \
		"$CIP_FIRST_SVC" "$CIP_LAST_SVC" "$NP_FIRST_SVC" "$NP_LAST_SVC")
	((CIP_RULES > 0)) && extra+=",\"kube_services_rules\":$CIP_RULES,\"kube_nodeports_rules\":$NP_RULES"
	settle
	log "data plane, empty tables: $CIP_FIRST_SVC $CIP_LAST_SVC $NP_FIRST_SVC $NP_LAST_SVC"
	dp_round "$side" empty "$CIP_FIRST" "$CIP_LAST" "$NP_FIRST" "$NP_LAST" "$dp_iperf_ip:5201" "$dp_udp_ip:53" "$extra" | tee -a "$DP_OUT" >&2
	dp_profile "$side" empty "$CIP_LAST" "$dp_iperf_ip:5201" "$dp_udp_ip:53"
	if ((${DP_HOLD:-100000} > 0)); then
		rm -f /run/bench-hold.ready
		t=$(now)
		ip netns exec "$dp_client" bash -c 'ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec "$@"' _ "$LOADGEN" hold -to "$dp_hold_ip:80" -n "${DP_HOLD:-100000}" \
			-from "$(IFS=,; echo "${dp_client_addrs[*]}")" -workers 8 -ready /run/bench-hold.ready >"$BENCH_LOGS/hold-$side-$BENCH_N.json" 2>"$BENCH_LOGS/hold-$side-$BENCH_N.log" &
		hold_pid=$!
		while [[ ! -f /run/bench-hold.ready ]] && kill -0 "$hold_pid" 2>/dev/null; do snooze 1; done
		held=$(cat /run/bench-hold.ready 2>/dev/null)
		ct=$(ip netns exec "$node" conntrack -C 2>/dev/null)
		ipvs_conns=$(ip netns exec "$node" awk 'NR > 1 { n++ } END { print n + 0 }' /proc/net/ip_vs_conn 2>/dev/null)
		log "held ${held:-0} connections in $(awk -v a="$t" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }') s; conntrack ${ct:-?} entries, IPVS ${ipvs_conns:-0} connections"
		# IPVS's connection table has a fixed number of buckets (the module's conn_tab_bits, 12 by
		# default): the held connections chain up in it, where conntrack's grows with its size.
		tab=$(awk '/size=/ { sub(/.*size=/, ""); print $1 + 0; exit }' /proc/net/ip_vs 2>/dev/null)
		settle
		dp_round "$side" held "$CIP_FIRST" "$CIP_LAST" "$NP_FIRST" "$NP_LAST" "$dp_iperf_ip:5201" "$dp_udp_ip:53" \
			"$extra,\"held\":${held:-0},\"conntrack_entries\":${ct:-null},\"ipvs_connections\":${ipvs_conns:-0},\"conntrack_max\":$(</proc/sys/net/netfilter/nf_conntrack_max),\"conntrack_buckets\":$(</proc/sys/net/netfilter/nf_conntrack_buckets),\"ipvs_conn_tab_size\":${tab:-null}" | tee -a "$DP_OUT" >&2
		kill "$hold_pid" 2>/dev/null
		wait "$hold_pid" 2>/dev/null
	fi
	kill -CONT "$pid"
}
