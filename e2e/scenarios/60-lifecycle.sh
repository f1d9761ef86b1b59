# 60-lifecycle.sh — established TCP connections across endpoint and Service removal, measured
# with the echo server's /stream (a line every 100 ms) through a Service: the largest gap
# between lines shows whether the connection kept flowing.
#
# 60: the endpoint a live connection reaches turns terminating (serving), then terminating and
#     not serving, then is removed: its real server stays at weight 0 and the stream flows; new
#     connections go to the other endpoint; once the stream is closed (RST) the real server goes.
# 61: node1 restarted with --ipvs-drain-timeout 45s (long enough that the cluster IP stream closes, and its virtual server goes, before it under a loaded emulated VM: 20 s was not); deleting a Service keeps a stream through its
#     cluster IP and one through its NodePort (from outside) flowing at weight 0; the cluster IP's
#     virtual server goes once its stream closes; the NodePort's at the first sync after the
#     limit, which cuts its stream (expire_nodest_conn). node1 goes back to the suite's flags.

# Under emulation on a loaded host a stream that nothing touched showed gaps of up to 2.4 s (CPU
# starvation, at no particular step); a cut connection stops for good, which the lines after each
# step catch, and a gap of 5 s or more would be a stall worth failing.
readonly stream_line_gap_max=5.0

# stream_start WHERE ADDR PORT LOG: a GET /stream over HTTP/1.0 from WHERE in the background,
# each line stamped with its arrival time in LOG; sets $stream_pid. socat's linger=0 makes its
# end an RST, so IPVS holds the closed connection 10 s (CLOSE), not 2 min (TIME_WAIT).
stream_start() {
	local where=$1 addr=$2 port=$3 log=$4
	: >"$log"
	ip netns exec "$where" bash -c "(printf 'GET /stream HTTP/1.0\r\n\r\n'; sleep 600) |
		socat - TCP:$addr:$port,linger=0 2>/dev/null |
		while IFS= read -r line; do [[ \$line == hostname=* ]] && echo \"\$EPOCHREALTIME \$line\"; done" >>"$log" 2>&1 &
	stream_pid=$!
}

# stream_stop PID: SIGKILL socat first (the kernel then closes its socket with an RST; were its
# input closed first it would send a FIN, and IPVS would hold the connection 2 min), then the
# rest of the pipeline.
stream_stop() {
	local all=() p
	descendants() {
		local c
		for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
			all+=("$c")
			descendants "$c"
		done
	}
	descendants "$1"
	for p in "${all[@]}"; do
		[[ $(cat /proc/"$p"/comm 2>/dev/null) == socat ]] && kill -KILL "$p" 2>/dev/null
	done
	kill -KILL "${all[@]}" "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

# stream_gap LOG [FROM [TO]]: the largest gap in seconds between consecutive lines of LOG that
# arrived between FROM and TO (epoch seconds), with the lines' count: "0.13 (57 lines)".
stream_gap() {
	awk -v from="${2:-0}" -v to="${3:-9e12}" '$1 >= from && $1 <= to {
		if (n && $1 - last > gap) gap = $1 - last; last = $1; n++ }
		END { printf "%.2f (%d lines)\n", gap, n }' "$1"
}

# stream_from LOG SINCE: the hostnames of the lines after SINCE, counted.
stream_from() { awk -v t="$2" '$1 > t { sub(/^hostname=/, "", $2); print $2 }' "$1" | sort | uniq -c | tr -s ' \n' ' '; }

# weight_of NODE PROTO VIP:PORT RS: the real server's weight, empty when it is not there.
weight_of() {
	ip netns exec "$1" ipvsadm -Ln "--$2-service" "$3" 2>/dev/null | awk -v rs="$4" '$1 == "->" && $2 == rs { print $4 }'
}
weight_is() { [[ "$(weight_of "$1" "$2" "$3" "$4")" == "$5" ]]; }
no_virtual_server() { ! ip netns exec "$1" ipvsadm -Ln "--$2-service" "$3" >/dev/null 2>&1; }


scenario_60() {
	heading "A live connection to an endpoint that turns terminating, then goes: it keeps flowing at weight 0"
	local failures=() info ip log=$E2E_LOGS/stream-60.log
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: life}
spec:
  ports: [{port: 8060, targetPort: 8080, protocol: TCP}]
YAML
) || { verdict 60 "terminating endpoint" false; return; }
	ip=$(field CLUSTER_IP "$info")
	kc set-endpoints life "$(pod_ip web)@node1" "$(pod_ip s2)@node2" || { verdict 60 "terminating endpoint" false; return; }
	show - "e2ectl apply-service life.yaml && e2ectl set-endpoints life web@node1 s2@node2" "CLUSTER_IP=$ip"
	wait_real_servers node1 tcp "$ip:8060" "$(pod_ip web):8080 $(pod_ip s2):8080"

	stream_start c1 "$ip" 8060 "$log"
	local pid=$stream_pid
	wait_until 20 grep -q seq= "$log" || failures+=("no stream line from $ip:8060 within 20 s")
	local victim survivor vnode snode
	victim=$(awk 'NR == 1 { sub(/^hostname=/, "", $2); print $2 }' "$log")
	case $victim in
	web) survivor=s2 vnode=node1 snode=node2 ;;
	s2) survivor=web vnode=node2 snode=node1 ;;
	*)
		stream_stop "$pid"
		verdict 60 "terminating endpoint: the stream names its endpoint" no_failures "${failures[@]}" "stream from '${victim}'"
		return
		;;
	esac
	local vrs="$(pod_ip "$victim"):8080" t0 t1 t2 t3 t_close took
	note "c1's stream reaches $victim; it turns terminating"
	t0=$(now)
	kc set-endpoints life "$(pod_ip "$victim")@$vnode:terminating" "$(pod_ip "$survivor")@$snode"
	wait_until 20 weight_is node1 tcp "$ip:8060" "$vrs" 0 || failures+=("$vrs not at weight 0 within 20 s of turning terminating")
	show - "e2ectl set-endpoints life $victim@$vnode:terminating $survivor@$snode  # ready=false serving=true terminating=true" \
		"node1: $vrs weight $(weight_of node1 tcp "$ip:8060" "$vrs") after $(since "$t0")s"
	# New connections avoid it: 8 of 8 to the survivor (by chance with both at weight 1: 1/256).
	local i got=()
	for i in 1 2 3 4 5 6 7 8; do
		got+=("$(ip netns exec c1 curl -s --max-time 3 "http://$ip:8060/" | sed -n 's/^hostname=//p')")
	done
	show c1 "for i in 1..8; do curl -s http://$ip:8060/ | grep hostname=; done" "${got[*]}"
	[[ " ${got[*]} " == *" $victim "* || $(printf '%s\n' "${got[@]}" | grep -c "^$survivor$") != 8 ]] &&
		failures+=("new connections reached: ${got[*]}, want $survivor 8 times")

	t1=$(now)
	kc set-endpoints life "$(pod_ip "$victim")@$vnode:terminating-notserving" "$(pod_ip "$survivor")@$snode"
	sleep 1.5
	show - "e2ectl set-endpoints life $victim@$vnode:terminating-notserving $survivor@$snode  # serving=false" \
		"node1 after $(since "$t1")s: $vrs weight $(weight_of node1 tcp "$ip:8060" "$vrs")"
	weight_is node1 tcp "$ip:8060" "$vrs" 0 || failures+=("$vrs not at weight 0 while terminating and not serving")

	t2=$(now)
	kc set-endpoints life "$(pod_ip "$survivor")@$snode"
	# Removed from the slice: drained at weight 0 (a sync or two to be sure it was not deleted).
	sleep 2
	show - "e2ectl set-endpoints life $survivor@$snode  # $victim removed" \
		"node1 after $(since "$t2")s: $vrs weight $(weight_of node1 tcp "$ip:8060" "$vrs"); $(ip netns exec node1 ipvsadm -Ln -t "$ip:8060" | awk -v rs="$vrs" '$2 == rs { print "active " $5 ", inactive " $6 }')"
	weight_is node1 tcp "$ip:8060" "$vrs" 0 || failures+=("$vrs not kept at weight 0 after its removal while the stream lives")
	t3=$(now)
	sleep 1
	local after
	after=$(stream_from "$log" "$t3")
	[[ $after == *" $victim "* ]] || failures+=("no stream line from $victim after the removal (lines: ${after:-none})")

	stream_stop "$pid"
	t_close=$(now)
	took=
	wait_until 45 bash -c "[[ -z \$(ip netns exec node1 ipvsadm -Ln -t $ip:8060 | awk -v rs=$vrs '\$2 == rs') ]]" && took=$(since "$t_close")
	[[ -n $took ]] || failures+=("$vrs still in node1's IPVS 45 s after the stream closed")
	local gap
	gap=$(stream_gap "$log" 0 "$t_close")
	show c1 "# the stream: largest gap between lines while $victim turned terminating and was removed" \
		"$gap; from $victim after the removal: $after; real server gone $took s after the stream closed (IPVS CLOSE 10 s + a sync)"
	awk -v g="${gap%% *}" -v m="$stream_line_gap_max" 'BEGIN { exit !(g < m) }' || failures+=("largest gap ${gap%% *} s, want < $stream_line_gap_max s")
	ip netns exec node1 ipvsadm -Ln -t "$ip:8060" >/dev/null 2>&1 && [[ "$(real_servers node1 tcp "$ip:8060" | tr -d '\n')" != "$(pod_ip "$survivor"):8080" ]] &&
		failures+=("node1's real servers at the end: $(real_servers node1 tcp "$ip:8060" | tr '\n' ' ')")
	kc delete-service life >/dev/null
	verdict 60 "a stream to $victim kept flowing while it turned terminating (serving, then not) and was removed (largest gap ${gap:-?}), at weight 0, 8 new connections to $survivor; its real server gone ${took:-never}s after the stream closed" \
		no_failures "${failures[@]}"
}

scenario_61() {
	heading "Deleting a Service drains its established connections (kubernetes#71894), up to --ipvs-drain-timeout"
	local failures=() info ip limit=45
	stop_proxier node1
	E2E_PROXIER_ARGS="${E2E_PROXIER_ARGS:-} --ipvs-drain-timeout ${limit}s" start_proxier node1
	wait_until 60 proxier_synced node1 || failures+=("node1's proxier with --ipvs-drain-timeout ${limit}s did not sync")
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: drain}
spec:
  type: NodePort
  ports: [{port: 8061, targetPort: 8080, nodePort: 30161, protocol: TCP}]
YAML
) || { verdict 61 "Service deletion drains" false; return; }
	ip=$(field CLUSTER_IP "$info")
	kc set-endpoints drain "$(pod_ip web)@node1" "$(pod_ip s2)@node2" || failures+=("set-endpoints drain failed")
	show - "node1: ipvsproxy run ... --ipvs-drain-timeout ${limit}s; e2ectl apply-service drain.yaml (NodePort 30161) && e2ectl set-endpoints drain web@node1 s2@node2" "CLUSTER_IP=$ip"
	local want="$(pod_ip web):8080 $(pod_ip s2):8080"
	wait_real_servers node1 tcp "$ip:8061" "$want"
	wait_real_servers node1 tcp "$node1_addr:30161" "$want"

	local log_c=$E2E_LOGS/stream-61-clusterip.log log_n=$E2E_LOGS/stream-61-nodeport.log pid_c pid_n
	stream_start c1 "$ip" 8061 "$log_c"
	pid_c=$stream_pid
	stream_start client "$node1_addr" 30161 "$log_n"
	pid_n=$stream_pid
	wait_until 20 grep -q seq= "$log_c" || failures+=("no line through the cluster IP")
	wait_until 20 grep -q seq= "$log_n" || failures+=("no line through the NodePort")

	local t_del t_seen seen
	t_del=$(now)
	kc delete-service drain >/dev/null || failures+=("delete-service drain failed")
	# From when node1 set the weights to 0 (e2ectl itself takes seconds under emulation).
	wait_until 30 weight_is node1 tcp "$node1_addr:30161" "$(ip netns exec node1 ipvsadm -Ln -t "$node1_addr:30161" 2>/dev/null | awk '$1 == "->" && $6 + $5 > 0 && $2 != "RemoteAddress:Port" { print $2; exit }')" 0
	t_seen=$(now) seen=$(since "$t_del")
	sleep 1
	local state
	state=$(ip netns exec node1 ipvsadm -Ln -t "$ip:8061" 2>&1 | awk '$1 == "->" && $2 != "RemoteAddress:Port" { print $2 " w" $4 " a" $5 }' | tr '\n' ' ')
	show - "e2ectl delete-service drain  # then node1: ipvsadm -Ln -t $ip:8061 (weight 0 seen ${seen}s after the deletion began)" "${state:-gone}"
	[[ -n $state ]] || failures+=("the cluster IP's virtual server is gone after the deletion, with a stream open")
	[[ -z $(ip netns exec node1 ipvsadm -Ln -t "$ip:8061" 2>/dev/null | awk '$1 == "->" && $2 != "RemoteAddress:Port" && $4 != 0') ]] ||
		failures+=("a real server of the deleted Service is not at weight 0")
	local t_mid after_c after_n
	t_mid=$(now)
	after_c=$(stream_from "$log_c" "$t_seen") after_n=$(stream_from "$log_n" "$t_seen")
	[[ -n $after_c ]] || failures+=("the cluster IP's stream stopped at the deletion")
	[[ -n $after_n ]] || failures+=("the NodePort's stream stopped at the deletion")

	# The cluster IP's stream ends: its virtual server goes (no established connection left).
	stream_stop "$pid_c"
	local t_close took_c took_n
	t_close=$(now)
	# A new connection finds nothing.
	ask c1 "curl -sS --max-time 2 http://$ip:8061/ >/dev/null"
	((status != 0)) || failures+=("a new connection to the deleted cluster IP was answered")
	wait_until 30 no_virtual_server node1 tcp "$ip:8061" && took_c=$(since "$t_close")
	[[ -n $took_c ]] || failures+=("the cluster IP's virtual server still there 30 s after its stream closed")
	# Gone because its stream closed, not because the limit passed: the NodePort's virtual server,
	# whose deadline was set in the same sync, is still there.
	local gone_c
	gone_c=$(since "$t_seen")
	no_virtual_server node1 tcp "$node1_addr:30161" &&
		failures+=("the NodePort's virtual server went with the cluster IP's (${gone_c}s after the weights went 0): the limit removed them, not the close")
	# The NodePort's stream lives on: cut at the first sync after the limit (period ${sync_period}).
	wait_until $((limit + 2 * ${sync_period%s})) no_virtual_server node1 tcp "$node1_addr:30161" && took_n=$(since "$t_seen")
	[[ -n $took_n ]] || failures+=("the NodePort's virtual server still there $((limit + 2 * ${sync_period%s})) s after the deletion")
	sleep 1.5
	stream_stop "$pid_n"
	local last_n last_n_del gap_c gap_n
	last_n=$(awk -v t="$t_seen" 'END { printf "%.1f", $1 - t }' "$log_n")
	last_n_del=$(awk -v t="$t_del" 'END { printf "%.1f", $1 - t }' "$log_n")
	gap_c=$(stream_gap "$log_c" 0 "$t_close") gap_n=$(stream_gap "$log_n" 0 "$t_mid")
	show - "# streams, seconds after node1 set the weights to 0" \
		"cluster IP: largest gap $gap_c until closed at $(awk -v a="$t_seen" -v b="$t_close" 'BEGIN { printf "%.1f", b - a }')s, virtual server gone ${took_c:-never}s after (${gone_c}s after the weights went 0); NodePort from $client_addr: largest gap $gap_n, last line at ${last_n}s (${last_n_del}s after the deletion began; limit ${limit}s, sync period $sync_period), virtual server gone by ${took_n:-never}s"
	for g in "${gap_c%% *}" "${gap_n%% *}"; do
		awk -v g="$g" -v m="$stream_line_gap_max" 'BEGIN { exit !(g < m) }' || failures+=("largest gap $g s, want < $stream_line_gap_max s")
	done
	# Cut at the first sync after the limit: not before the limit counted from the deletion's
	# start, at most a sync period (and 2 s of slack) after the limit counted from when the
	# weights were seen at 0 (e2ectl and the watch take seconds under emulation).
	local cut_max=$((limit + ${sync_period%s} + 2))
	[[ -n $took_n ]] && awk -v ld="$last_n_del" -v l="$last_n" -v lim="$limit" -v m="$cut_max" 'BEGIN { exit !(ld >= lim - 0.5 && l <= m) }' ||
		failures+=("NodePort stream's last line ${last_n_del}s after the deletion began, ${last_n}s after the weights went 0: want cut after ${limit}s and by ${cut_max}s")

	stop_proxier node1
	start_proxier node1
	wait_until 60 proxier_synced node1 || failures+=("node1's proxier did not sync after its restart with the suite's flags")
	verdict 61 "Service deleted: streams through its cluster IP and NodePort kept flowing at weight 0 (gaps ${gap_c%% *}/${gap_n%% *} s); cluster IP's virtual server gone ${took_c:-never}s after its stream closed; the NodePort's stream cut ${last_n:-?}s after the weights went 0 (limit ${limit}s)" \
		no_failures "${failures[@]}"
}
