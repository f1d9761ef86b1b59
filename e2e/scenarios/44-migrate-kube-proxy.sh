# 44-migrate-kube-proxy.sh — the migration of docs/migrate-from-kube-proxy.md from the real
# kube-proxy v1.36.3 (built beside the API server: $E2E_BIN/kube-proxy), with live connections
# measured across the switch. node1's ipvsproxy is stopped and cleaned up as the rollback pod
# would; kube-proxy runs in node1's namespace in IPVS mode and programs two Services. Then three
# streams run (e2e/echoserver -measure: a line or a datagram per 100 ms, the longest gap between
# arrivals reported at the end): a TCP connection from pod c1 to a ClusterIP, a TCP connection
# from the outside client to node1's NodePort, a UDP stream from one source port of c1 to a UDP
# ClusterIP. The switch is the documented one: kube-proxy stopped, `ipvsproxy cleanup
# --kube-proxy-leftovers` (the init container; exits 0, and 0 again), ipvsproxy started. Checked:
# no stream broke, no pause of its own of 1 s or more, the virtual servers adopted (their connection
# counters in `ipvsadm -Ln --stats` kept, the scheduler rewritten to ipvsproxy's), new connections
# served. The Services are RequireDualStack and kube-proxy runs dual-stack, so the same three
# streams run over IPv6 too (the IPv6 cluster IPs, node1's IPv6 node port), checked the same way
# (44v6). A control stream between two pods, crossing no proxy, tells the loaded VM's stalls
# (every stream pauses at once) from the switch's. Then the rollback the docs give for kube-proxy's
# IPVS mode (ipvsproxy stopped, kube-proxy started on its state: `ipvsproxy cleanup` would delete
# the virtual servers and reset their connections), measured the same way (44rollback).
#
# scenario_44rollback (the rollback), scenario_44iptables and scenario_44nftables (the migration
# from kube-proxy's other modes, one TCP stream) are not in the default order, for time (the
# name is not a number): `make e2e-migrate`, or IPVSPROXY_E2E_SCENARIOS="44rollback".

readonly kpm44_port=30044 kpm44_udp_port=53

# kpm44_kube_proxy_start NODE MODE: the real kube-proxy in NODE's namespace as its DaemonSet's
# pod would run it (hostNetwork), with the admin's kubeconfig. nf_conntrack_max is global, not
# writable from a node's namespace: --conntrack-max-per-core 0 leaves it, as kube-proxy allows.
kpm44_kube_proxy_start() {
	local node=$1 mode=$2
	echo "--- start --proxy-mode $mode $(date -u +%T.%N)" >>"$E2E_LOGS/kube-proxy-$node.log"
	ip netns exec "$node" "$E2E_BIN/kube-proxy" --kubeconfig "$ADMIN_KUBECONFIG" \
		--hostname-override "$node" --proxy-mode "$mode" --cluster-cidr "$cluster_cidrs" \
		--conntrack-max-per-core 0 >>"$E2E_LOGS/kube-proxy-$node.log" 2>&1 &
	echo $! >"$E2E_LOGS/kube-proxy-$node.pid"
}

# kpm44_kube_proxy_stop NODE: SIGTERM, as the kubelet stops the pod; wait until it is gone.
kpm44_kube_proxy_stop() {
	local f=$E2E_LOGS/kube-proxy-$1.pid pid
	[[ -f $f ]] || return 0
	pid=$(<"$f")
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null
	rm -f "$f"
}

# kpm44_stream_start NAME WHERE PROTO ADDR: a measuring stream in WHERE's namespace.
kpm44_stream_start() {
	local name=$1 where=$2 proto=$3 addr=$4
	ip netns exec "$where" "$ECHOSERVER" -measure "$proto" -to "$addr" >"$E2E_LOGS/stream-$name.log" 2>&1 &
	echo $! >"$E2E_LOGS/stream-$name.pid"
}

# kpm44_stream_end NAME...: stop the streams at once (stopped one by one, the last would count
# the others' stopping as its own final silence) and print each one's report line
# (received=... max_gap=... pauses=...), in order.
kpm44_stream_end() {
	local name pids=()
	for name in "$@"; do
		[[ -f $E2E_LOGS/stream-$name.pid ]] && pids+=("$(<"$E2E_LOGS/stream-$name.pid")")
	done
	((${#pids[@]} == 0)) || kill -TERM "${pids[@]}" 2>/dev/null
	for name in "$@"; do
		# Called in $(...): not the streams' parent, so it cannot wait for them; their reports
		# are the sign they are done.
		wait_until 20 grep -q '^received=' "$E2E_LOGS/stream-$name.log"
		rm -f "$E2E_LOGS/stream-$name.pid"
		grep '^received=' "$E2E_LOGS/stream-$name.log" || echo "no report: $(oneline "$(cat "$E2E_LOGS/stream-$name.log")")"
	done
}

# kpm44_gap REPORT: the longest gap in a report, in seconds.
kpm44_gap() { sed -n 's/.*max_gap=\([0-9.]*\).*/\1/p' <<<"$1"; }

# kpm44_own_gap REPORT CONTROL: the longest pause of a stream that the control stream (two pods,
# no proxy between them) did not share: each pause (from-to, in the report's pauses=) less its
# overlap with the control's pauses. A loaded VM stops every process in it for seconds at times;
# those stalls show in every stream at once and are not the switch's.
kpm44_own_gap() {
	awk -v s="$(sed -n 's/.*pauses=//p' <<<"$1")" -v c="$(sed -n 's/.*pauses=//p' <<<"$2")" 'BEGIN {
		nc = split(c, cp, ",")
		ns = split(s, sp, ",")
		max = 0
		for (i = 1; i <= ns; i++) {
			split(sp[i], a, "-")
			own = a[2] - a[1]
			for (j = 1; j <= nc; j++) {
				split(cp[j], b, "-")
				lo = a[1] > b[1] ? a[1] : b[1]
				hi = a[2] < b[2] ? a[2] : b[2]
				if (hi > lo) own -= hi - lo
			}
			if (own > max) max = own
		}
		printf "%.3f\n", max
	}'
}

# kpm44_stream_ok NAME REPORT CONTROL: no error, at least 20 arrivals, no pause of its own of 1 s
# or more (kpm44_own_gap).
kpm44_stream_ok() {
	local name=$1 report=$2 control=$3 got own
	got=$(sed -n 's/^received=\([0-9]*\).*/\1/p' <<<"$report")
	own=$(kpm44_own_gap "$report" "$control")
	[[ $report == *error=none* ]] || { echo "$name broke: $report"; return 1; }
	[[ -n $got ]] && ((got >= 20)) || { echo "$name: too few arrivals: $report"; return 1; }
	awk -v g="$own" 'BEGIN { exit !(g < 1.0) }' ||
		{ echo "$name: a pause of ${own}s the control did not share: $report; control: $control"; return 1; }
}

# The streams through node1 per family (the control, c1 to web's pod IP, is shared).
readonly kpm44_streams4="c1-tcp client-nodeport c1-udp" kpm44_streams6="c1-tcp6 client-nodeport6 c1-udp6"

# kpm44_streams_start: the three streams through node1 over each family, and the control.
kpm44_streams_start() {
	kpm44_stream_start c1-tcp c1 tcp "$kpm44_ip:80"
	kpm44_stream_start client-nodeport client tcp "$node1_addr:$kpm44_port"
	kpm44_stream_start c1-udp c1 udp "$kpm44_udp_ip:$kpm44_udp_port"
	kpm44_stream_start c1-tcp6 c1 tcp "[$kpm44_ip6]:80"
	kpm44_stream_start client-nodeport6 client tcp "[$node1_addr6]:$kpm44_port"
	kpm44_stream_start c1-udp6 c1 udp "[$kpm44_udp_ip6]:$kpm44_udp_port"
	kpm44_stream_start control c1 tcp "$(pod_ip web):8080"
}

# kpm44_streams_end WHAT: stop the streams, show their reports, check them (the IPv4 ones append
# to failures, the IPv6 ones to failures6); kpm44_gaps and kpm44_gaps6 say each stream's gaps.
kpm44_streams_end() {
	local what=$1 name report control why reports
	kpm44_gaps= kpm44_gaps6=
	# shellcheck disable=SC2086 # the lists are words
	reports=$(kpm44_stream_end control $kpm44_streams4 $kpm44_streams6)
	control=$(sed -n 1p <<<"$reports")
	local i=1
	for name in $kpm44_streams4 $kpm44_streams6; do
		i=$((i + 1))
		report=$(sed -n "${i}p" <<<"$reports")
		show - "stream $name $what" "$report"
		if [[ $name == *6 ]]; then
			kpm44_gaps6+="${kpm44_gaps6:+, }$name $(kpm44_gap "$report") s (own $(kpm44_own_gap "$report" "$control") s)"
			why=$(kpm44_stream_ok "$name" "$report" "$control") || failures6+=("$why")
		else
			kpm44_gaps+="${kpm44_gaps:+, }$name $(kpm44_gap "$report") s (own $(kpm44_own_gap "$report" "$control") s)"
			why=$(kpm44_stream_ok "$name" "$report" "$control") || failures+=("$why")
		fi
	done
	show - "stream control (c1 -> web's pod IP, no proxy) $what" "$control"
	kpm44_gaps+=", control $(kpm44_gap "$control") s"
	kpm44_gaps6+=", control $(kpm44_gap "$control") s"
}

# kpm44_vs_scheduler NODE PROTO VIP:PORT: the scheduler of one virtual server.
kpm44_vs_scheduler() {
	ip netns exec "$1" ipvsadm -Ln "--$2-service" "$3" 2>/dev/null | awk '$1 == "'"${2^^}"'" { print $3 }'
}

# kpm44_vs_conns NODE VS...: "VS CONNS" of the given virtual servers ("TCP 10.96.0.5:80").
kpm44_vs_conns() {
	local node=$1 stats
	shift
	stats=$(ip netns exec "$node" ipvsadm -Ln --stats --exact)
	local vs
	for vs in "$@"; do
		awk -v p="${vs% *}" -v v="${vs#* }" '$1 == p && $2 == v { print p, v, $3; found = 1 } END { if (!found) print p, v, "none" }' <<<"$stats"
	done
}

# kpm44_counters_kept BEFORE AFTER: every counter in AFTER is a number >= the one in BEFORE.
kpm44_counters_kept() {
	paste -d' ' <(echo "$1") <(echo "$2") | awk '
		$3 == "none" || $6 == "none" || $6 + 0 < $3 + 0 { print $1, $2, "connections", $3, "->", $6; bad = 1 }
		END { exit bad }'
}

# kpm44_programmed NODE SCHED VS... ("tcp VIP:PORT"): each virtual server exists with SCHED and a
# real server.
kpm44_programmed() {
	local node=$1 sched=$2 vs
	shift 2
	for vs in "$@"; do
		[[ $(kpm44_vs_scheduler "$node" "${vs% *}" "${vs#* }") == "$sched" ]] || return 1
		[[ -n $(real_servers "$node" "${vs% *}" "${vs#* }") ]] || return 1
	done
}

# kpm44_services: the TCP NodePort (web on node1) and the UDP ClusterIP (u1 on node1), both
# RequireDualStack with each pod's two addresses; sets kpm44_ip, kpm44_udp_ip and their IPv6
# twins kpm44_ip6, kpm44_udp_ip6.
kpm44_services() {
	local info
	info=$(kc apply-service - <<YAML
apiVersion: v1
kind: Service
metadata: {name: kpm44}
spec:
  type: NodePort
  ipFamilyPolicy: RequireDualStack
  ports: [{port: 80, targetPort: 8080, nodePort: $kpm44_port, protocol: TCP}]
YAML
) || return 1
	kpm44_ip=$(cluster_ip_of 4 "$info") kpm44_ip6=$(cluster_ip_of 6 "$info")
	# shellcheck disable=SC2046 # one argument a line
	kc set-endpoints kpm44 $(dual_endpoints web@node1) || return 1
	info=$(kc apply-service - <<YAML
apiVersion: v1
kind: Service
metadata: {name: kpm44-udp}
spec:
  ipFamilyPolicy: RequireDualStack
  ports: [{port: $kpm44_udp_port, targetPort: 8081, protocol: UDP}]
YAML
) || return 1
	kpm44_udp_ip=$(cluster_ip_of 4 "$info") kpm44_udp_ip6=$(cluster_ip_of 6 "$info")
	# shellcheck disable=SC2046
	kc set-endpoints kpm44-udp $(dual_endpoints u1@node1) || return 1
	[[ -n $kpm44_ip && -n $kpm44_ip6 && -n $kpm44_udp_ip && -n $kpm44_udp_ip6 ]]
}

# kpm44_vs_lists: the virtual servers of kpm44_services through node1, for kpm44_programmed
# (vs_list, vs_list6: "tcp VIP:PORT") and kpm44_vs_conns (vs_stats, vs_stats6: "TCP VIP:PORT"),
# set in the caller's locals.
kpm44_vs_lists() {
	vs_list=("tcp $kpm44_ip:80" "tcp $node1_addr:$kpm44_port" "udp $kpm44_udp_ip:$kpm44_udp_port")
	vs_stats=("TCP $kpm44_ip:80" "TCP $node1_addr:$kpm44_port" "UDP $kpm44_udp_ip:$kpm44_udp_port")
	vs_list6=("tcp [$kpm44_ip6]:80" "tcp [$node1_addr6]:$kpm44_port" "udp [$kpm44_udp_ip6]:$kpm44_udp_port")
	vs_stats6=("TCP [$kpm44_ip6]:80" "TCP [$node1_addr6]:$kpm44_port" "UDP [$kpm44_udp_ip6]:$kpm44_udp_port")
}

# kpm44_new_connections WHEN: fresh connections through node1 answer over each family (c1 to
# the ClusterIP, the client to the NodePort, a new UDP socket of c1); appends to failures and
# failures6.
kpm44_new_connections() {
	local when=$1
	ask c1 "curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://$kpm44_ip/  # a new connection $when"
	[[ $answer == 200 ]] || failures+=("c1 -> cluster IP $when: $answer")
	ask client "curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://$node1_addr:$kpm44_port/  # a new connection $when"
	[[ $answer == 200 ]] || failures+=("client -> NodePort $when: $answer")
	ask c1 "echo ping | timeout 8 socat -t 5 - UDP:$kpm44_udp_ip:$kpm44_udp_port | grep hostname=  # a new UDP socket $when"
	[[ $answer == hostname=u1 ]] || failures+=("c1 -> UDP cluster IP $when: $answer")
	ask c1 "curl -s -o /dev/null -w '%{http_code}' --max-time 5 'http://[$kpm44_ip6]/'  # a new IPv6 connection $when"
	[[ $answer == 200 ]] || failures6+=("c1 -> IPv6 cluster IP $when: $answer")
	ask client "curl -s -o /dev/null -w '%{http_code}' --max-time 5 'http://[$node1_addr6]:$kpm44_port/'  # a new IPv6 connection $when"
	[[ $answer == 200 ]] || failures6+=("client -> IPv6 NodePort $when: $answer")
	ask c1 "echo ping | timeout 8 socat -t 5 - 'UDP6:[$kpm44_udp_ip6]:$kpm44_udp_port' | grep hostname=  # a new IPv6 UDP socket $when"
	[[ $answer == hostname=u1 ]] || failures6+=("c1 -> IPv6 UDP cluster IP $when: $answer")
}

# kpm44_to_ipvsproxy: the documented switch: kube-proxy stopped, the init container's clean-up
# (exit 0, then 0 again with nothing removed), ipvsproxy started; sets kpm44_switched (seconds).
kpm44_to_ipvsproxy() {
	local t
	t=$(now)
	kpm44_kube_proxy_stop node1
	ask node1 "ipvsproxy cleanup --kube-proxy-leftovers  # the init container"
	# Its error lines only: the verdict line has room for little.
	((status == 0)) || failures+=("cleanup --kube-proxy-leftovers exited $status: $(grep -E '^E[0-9]' <<<"$answer" | cut -c1-200 | head -n 2 | tr '\n' ' ')")
	[[ $answer == *"Removed kube-proxy's leftovers"* && $answer != *count=0* ]] || failures+=("the clean-up removed nothing")
	ask node1 "ipvsproxy cleanup --kube-proxy-leftovers  # again: a restart's init container"
	((status == 0)) || failures+=("the second cleanup --kube-proxy-leftovers exited $status: $(grep -E '^E[0-9]' <<<"$answer" | cut -c1-200 | head -n 2 | tr '\n' ' ')")
	[[ $answer == *count=0* ]] || failures+=("the second clean-up removed something: $(oneline "$answer")")
	start_proxier node1
	wait_until 120 proxier_synced node1 || failures+=("ipvsproxy did not sync on node1")
	kpm44_switched=$(since "$t")
	show node1 "# kube-proxy stopped -> ipvsproxy's first sync done" "$kpm44_switched s"
}

scenario_44() {
	heading "migration from the real kube-proxy in IPVS mode with live connections, and back"
	local failures=() failures6=() t before after why before6 after6
	kpm44_services || { verdict 44 "migration from kube-proxy IPVS mode" false; verdict 44v6 "migration from kube-proxy IPVS mode over IPv6" false; return; }
	local vs_list vs_stats vs_list6 vs_stats6
	kpm44_vs_lists

	# node1 as kube-proxy runs it: ipvsproxy gone with its state (the rollback pod's clean-up),
	# then kube-proxy in IPVS mode, which programs the Services with its own scheduler, rr.
	stop_proxier node1
	ask node1 "ipvsproxy cleanup  # node1 handed to kube-proxy"
	t=$(now)
	kpm44_kube_proxy_start node1 ipvs
	show node1 "kube-proxy --proxy-mode ipvs --hostname-override node1 --cluster-cidr $cluster_cidrs --conntrack-max-per-core 0 &" ""
	wait_until 180 kpm44_programmed node1 rr "${vs_list[@]}" || failures+=("kube-proxy did not program the Services within 180 s")
	wait_until 60 kpm44_programmed node1 rr "${vs_list6[@]}" || failures6+=("kube-proxy did not program the IPv6 Services within 60 s of the IPv4 ones")
	show node1 "ipvsadm -Ln  # kube-proxy's, $(since "$t") s after its start" "$(ip netns exec node1 ipvsadm -Ln)"
	kpm44_new_connections "under kube-proxy"
	ask node1 "ipset list -n | grep -cE '^KUBE-(6-)?(NODE-PORT-LOCAL-|EXTERNAL-IP-LOCAL|LOAD-BALANCER-LOCAL|LOAD-BALANCER-SOURCE-)'  # kube-proxy's own sets"
	local own_sets=$answer

	kpm44_streams_start
	sleep 3
	before=$(kpm44_vs_conns node1 "${vs_stats[@]}") before6=$(kpm44_vs_conns node1 "${vs_stats6[@]}")
	show node1 "ipvsadm -Ln --stats --exact  # connections per virtual server, streams open" "$before"$'\n'"$before6"
	kpm44_to_ipvsproxy
	sleep 3
	after=$(kpm44_vs_conns node1 "${vs_stats[@]}") after6=$(kpm44_vs_conns node1 "${vs_stats6[@]}")
	show node1 "ipvsadm -Ln --stats --exact  # after the switch" "$after"$'\n'"$after6"
	why=$(kpm44_counters_kept "$before" "$after") || failures+=("virtual servers recreated: $(oneline "$why")")
	why=$(kpm44_counters_kept "$before6" "$after6") || failures6+=("IPv6 virtual servers recreated: $(oneline "$why")")
	[[ $(kpm44_vs_scheduler node1 tcp "$kpm44_ip:80") == twos ]] || failures+=("the cluster IP's virtual server does not have ipvsproxy's scheduler: not adopted")
	[[ $(kpm44_vs_scheduler node1 tcp "[$kpm44_ip6]:80") == twos ]] || failures6+=("the IPv6 cluster IP's virtual server does not have ipvsproxy's scheduler: not adopted")
	kpm44_new_connections "under ipvsproxy"
	kpm44_streams_end "across the switch"
	ask node1 "ipset list -n | grep -cE '^KUBE-(6-)?(NODE-PORT-LOCAL-|EXTERNAL-IP-LOCAL|LOAD-BALANCER-LOCAL|LOAD-BALANCER-SOURCE-)'  # after the clean-up"
	[[ $own_sets =~ ^[1-9] ]] || failures+=("kube-proxy made none of its own sets: nothing to check the clean-up against")
	[[ $answer == 0 ]] || failures+=("$answer of kube-proxy's own sets left")
	verdict 44 "migration from the real kube-proxy in IPVS mode with live connections (gaps: $kpm44_gaps; switch $kpm44_switched s): TCP from a pod, TCP to a NodePort from outside, UDP from one port: none broke, no pause of its own (beyond the control stream's) >= 1 s, virtual servers adopted (counters kept, scheduler rewritten), the clean-up exits 0 twice, kube-proxy's own sets gone, new connections served" \
		no_failures "${failures[@]}"
	verdict 44v6 "the same switch over IPv6 (gaps: $kpm44_gaps6): TCP from a pod to the IPv6 cluster IP, TCP to node1's IPv6 NodePort from outside, UDP from one port to the IPv6 cluster IP: none broke, no pause of its own >= 1 s, the IPv6 virtual servers adopted (counters kept, scheduler rewritten), new IPv6 connections served under both proxies" \
		no_failures "${failures6[@]}"

	# node1 is on ipvsproxy now, as the other scenarios expect it.
	kc delete-service kpm44 >/dev/null || true
	kc delete-service kpm44-udp >/dev/null || true
}

# scenario_44rollback: the rollback to kube-proxy's IPVS mode, measured the same way: ipvsproxy
# stopped, kube-proxy started on the state it left (no `ipvsproxy cleanup`: that deletes the
# virtual servers, and IPVS resets the connections they carried; see the docs). Not in the
# default order, for time (`make e2e-migrate`).
# kpm44_back_to_ipvsproxy: node1 from kube-proxy back to ipvsproxy, as the scenarios after a
# rollback expect it, and the Services gone; appends to failures.
kpm44_back_to_ipvsproxy() {
	kpm44_kube_proxy_stop node1
	IPVSPROXY_LOCK_FILE=$(node_lock node1) ip netns exec node1 "$ipvsproxy" cleanup --kube-proxy-leftovers >/dev/null 2>&1
	start_proxier node1
	wait_until 120 proxier_synced node1 || failures+=("node1's ipvsproxy did not come back")
	kc delete-service kpm44 >/dev/null || true
	kc delete-service kpm44-udp >/dev/null || true
}

scenario_44rollback() {
	heading "rollback from ipvsproxy to the real kube-proxy in IPVS mode with live connections"
	local failures=() failures6=() t before after why
	kpm44_services || { verdict 44rollback "rollback to kube-proxy IPVS mode" false; return; }
	local vs_list vs_stats vs_list6 vs_stats6
	kpm44_vs_lists
	vs_list+=("${vs_list6[@]}") vs_stats+=("${vs_stats6[@]}")
	wait_until 60 kpm44_programmed node1 twos "${vs_list[@]}" || failures+=("ipvsproxy did not program the Services within 60 s")
	kpm44_streams_start
	sleep 3
	before=$(kpm44_vs_conns node1 "${vs_stats[@]}")
	show node1 "ipvsadm -Ln --stats --exact  # connections per virtual server, streams open" "$before"
	t=$(now)
	stop_proxier node1
	kpm44_kube_proxy_start node1 ipvs
	show node1 "kube-proxy --proxy-mode ipvs ... &  # the rollback, on ipvsproxy's state" ""
	wait_until 180 kpm44_programmed node1 rr "${vs_list[@]}" || failures+=("kube-proxy did not program the Services within 180 s")
	local switched
	switched=$(since "$t")
	show node1 "# ipvsproxy stopped -> kube-proxy rewrote the virtual servers" "$switched s"
	sleep 3
	ask node1 "ipset list -n | grep -E 'IPVS-OWNED|SERVICE-CIDRS|NO-NODE'; ip route show table local dev kube-ipvs0 proto 233; iptables-save | grep -E '^[*]|SERVICE-CIDRS|NO-NODE|OUT-FILTER'  # what kube-proxy left of ipvsproxy's"
	# The rollback's last step, under the live streams: refused until kube-proxy's first sync
	# has rewritten the shared chains, then it removes what kube-proxy does not take over.
	local handover="IPVSPROXY_LOCK_FILE=$(node_lock node1) ipvsproxy cleanup --after-kube-proxy-ipvs"
	wait_until 60 ip netns exec node1 env IPVSPROXY_LOCK_FILE="$(node_lock node1)" "$ipvsproxy" cleanup --after-kube-proxy-ipvs >/dev/null 2>&1 ||
		failures+=("cleanup --after-kube-proxy-ipvs did not exit 0 within 60 s")
	ask node1 "$handover 2>&1 | grep -c 'count=0'; echo exit \${PIPESTATUS[0]}  # a second run removes nothing"
	[[ $answer == *"exit 0"* && $answer == 1* ]] || failures+=("a second cleanup --after-kube-proxy-ipvs: $(oneline "$answer")")
	ask node1 "ipset list -n | grep -cE 'IPVS-OWNED|SERVICE-CIDRS|NO-NODE|IPVS-SERVICES'; ip route show table local dev kube-ipvs0 proto 233 | wc -l; iptables-save -t mangle | grep -c OUT-FILTER  # ipvsproxy's own sets, routes, mangle filter after it"
	[[ $(tr -s ' \n' ' ' <<<"$answer") == "0 0 0 " ]] || failures+=("left after cleanup --after-kube-proxy-ipvs: $(oneline "$answer")")
	ask node1 "ipvsadm -Ln | grep -c '^[TU]'; ip -br link show kube-ipvs0 | wc -l  # the virtual servers and kube-ipvs0 stay, kube-proxy's"
	[[ $(head -n1 <<<"$answer") -ge 6 && $(tail -n1 <<<"$answer") == 1 ]] || failures+=("virtual servers or kube-ipvs0 gone: $(oneline "$answer")")
	after=$(kpm44_vs_conns node1 "${vs_stats[@]}")
	show node1 "ipvsadm -Ln --stats --exact  # after the rollback and the clean-up" "$after"
	why=$(kpm44_counters_kept "$before" "$after") || failures+=("virtual servers recreated: $(oneline "$why")")
	kpm44_new_connections "under kube-proxy again"
	kpm44_streams_end "across the rollback"

	kpm44_back_to_ipvsproxy
	failures+=("${failures6[@]/#/IPv6: }")
	verdict 44rollback "rollback to the real kube-proxy in IPVS mode (gaps: $kpm44_gaps; IPv6: $kpm44_gaps6; switch $switched s): the three streams over each family kept across the switch and cleanup --after-kube-proxy-ipvs, no pause of their own >= 1 s, counters kept, new connections served; ipvsproxy's own sets, routes and mangle filter gone, a second run removes nothing" \
		no_failures "${failures[@]}"
}

# kpm44_other_mode MODE: the migration from kube-proxy's iptables or nftables mode with one TCP
# stream (c1 to the cluster IP) and the control: the command removes the mode's rules or tables,
# exits 0 twice, the stream survives, ipvsproxy serves.
kpm44_other_mode() {
	local mode=$1 failures=() t rules
	case $mode in
	iptables) rules="iptables-save | grep -cE '^-A KUBE-(SVC|SEP)-'" ;;
	nftables) rules="{ nft list tables; nft list table ip kube-proxy; } 2>/dev/null | grep -cE 'table ip6? kube-proxy|kpm44'" ;;
	esac
	kpm44_services || { verdict "44$mode" "migration from kube-proxy $mode mode" false; return; }
	stop_proxier node1
	ask node1 "ipvsproxy cleanup  # node1 handed to kube-proxy"
	t=$(now)
	kpm44_kube_proxy_start node1 "$mode"
	show node1 "kube-proxy --proxy-mode $mode --hostname-override node1 --cluster-cidr $cluster_cidrs --conntrack-max-per-core 0 &" ""
	# ipvsproxy's state is gone: an answer from the cluster IP is kube-proxy's.
	wait_until 180 bash -c "[[ \$(ip netns exec c1 curl -s -o /dev/null -w '%{http_code}' --max-time 2 http://$kpm44_ip/) == 200 ]]" ||
		failures+=("kube-proxy did not serve the cluster IP within 180 s")
	ask node1 "$rules  # kube-proxy's rules for the Services, $(since "$t") s after its start"
	local had=$answer
	kpm44_stream_start c1-tcp c1 tcp "$kpm44_ip:80"
	kpm44_stream_start control c1 tcp "$(pod_ip web):8080"
	sleep 3
	kpm44_to_ipvsproxy
	ask node1 "$rules  # after the clean-up"
	[[ $had =~ ^[1-9] ]] || failures+=("kube-proxy's $mode rules not found before the switch")
	[[ $answer == 0 ]] || failures+=("$answer of kube-proxy's $mode rules left")
	sleep 3
	ask c1 "curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://$kpm44_ip/  # a new connection under ipvsproxy"
	[[ $answer == 200 ]] || failures+=("c1 -> cluster IP under ipvsproxy: $answer")
	local control report why
	report=$(kpm44_stream_end control c1-tcp)
	control=$(sed -n 1p <<<"$report")
	report=$(sed -n 2p <<<"$report")
	show - "stream c1-tcp across the switch" "$report"
	show - "stream control (c1 -> web's pod IP, no proxy)" "$control"
	why=$(kpm44_stream_ok c1-tcp "$report" "$control") || failures+=("$why")
	kc delete-service kpm44 >/dev/null || true
	kc delete-service kpm44-udp >/dev/null || true
	verdict "44$mode" "migration from the real kube-proxy in $mode mode (gap c1-tcp $(kpm44_gap "$report") s, own $(kpm44_own_gap "$report" "$control") s, control $(kpm44_gap "$control") s; switch $kpm44_switched s): its rules removed, the clean-up exits 0 twice, the TCP stream kept, ipvsproxy serves" \
		no_failures "${failures[@]}"
}

scenario_44iptables() { kpm44_other_mode iptables; }
scenario_44nftables() { kpm44_other_mode nftables; }

# kpm44_rollback_other_mode MODE: the rollback to kube-proxy's iptables or nftables mode, as the
# migration guide gives it (ipvsproxy stopped, `ipvsproxy cleanup`, kube-proxy started), under a
# TCP stream and a UDP stream through node1 and the control. Those modes do not use IPVS, so the
# clean-up deletes the virtual servers and their connections with them: the scenario measures what
# a user sees (each stream's end, the time until a new connection is served by kube-proxy) and
# checks that kube-proxy then serves, its rules are there and nothing of ipvsproxy's is left.
kpm44_rollback_other_mode() {
	local mode=$1 failures=() t rules outage
	case $mode in
	iptables) rules="iptables-save | grep -cE '^-A KUBE-(SVC|SEP)-'" ;;
	nftables) rules="{ nft list tables; nft list table ip kube-proxy; } 2>/dev/null | grep -cE 'table ip6? kube-proxy|kpm44'" ;;
	esac
	kpm44_services || { verdict "44rb$mode" "rollback to kube-proxy $mode mode" false; return; }
	wait_until 60 kpm44_programmed node1 twos "tcp $kpm44_ip:80" "udp $kpm44_udp_ip:$kpm44_udp_port" ||
		failures+=("ipvsproxy did not program the Services within 60 s")
	kpm44_stream_start c1-tcp c1 tcp "$kpm44_ip:80"
	kpm44_stream_start c1-udp c1 udp "$kpm44_udp_ip:$kpm44_udp_port"
	kpm44_stream_start control c1 tcp "$(pod_ip web):8080"
	sleep 3
	t=$(now)
	stop_proxier node1
	ask node1 "ipvsproxy cleanup  # the rollback pod"
	((status == 0)) || failures+=("ipvsproxy cleanup exited $status")
	kpm44_kube_proxy_start node1 "$mode"
	show node1 "kube-proxy --proxy-mode $mode --hostname-override node1 --cluster-cidr $cluster_cidrs --conntrack-max-per-core 0 &" ""
	wait_until 180 bash -c "[[ \$(ip netns exec c1 curl -s -o /dev/null -w '%{http_code}' --max-time 2 http://$kpm44_ip/) == 200 ]]" ||
		failures+=("kube-proxy did not serve the cluster IP within 180 s")
	outage=$(since "$t")
	show - "# ipvsproxy stopped -> a new connection to the cluster IP answered by kube-proxy" "$outage s"
	ask c1 "echo ping | timeout 8 socat -t 5 - UDP:$kpm44_udp_ip:$kpm44_udp_port | grep hostname=  # a new UDP socket under kube-proxy"
	[[ $answer == hostname=u1 ]] || failures+=("c1 -> UDP cluster IP under kube-proxy: $answer")
	ask node1 "$rules  # kube-proxy's rules for the Services"
	[[ $answer =~ ^[1-9] ]] || failures+=("kube-proxy's $mode rules not found")
	ask node1 "ipvsadm -Ln | grep -c '^[TU]'; ip link show kube-ipvs0 2>/dev/null | wc -l; ipset list -n | grep -c '^KUBE-'  # ipvsproxy's virtual servers, kube-ipvs0, sets"
	[[ $(tr -s ' \n' ' ' <<<"$answer") == "0 0 0 " ]] || failures+=("left of ipvsproxy's state under kube-proxy $mode: $(oneline "$answer")")
	sleep 3
	local reports control tcp udp
	reports=$(kpm44_stream_end control c1-tcp c1-udp)
	control=$(sed -n 1p <<<"$reports") tcp=$(sed -n 2p <<<"$reports") udp=$(sed -n 3p <<<"$reports")
	show - "stream c1-tcp across the rollback" "$tcp"
	show - "stream c1-udp across the rollback" "$udp"
	show - "stream control (c1 -> web's pod IP, no proxy)" "$control"
	[[ $control == *error=none* ]] || failures+=("the control stream broke: $control")
	kpm44_back_to_ipvsproxy
	verdict "44rb$mode" "rollback to the real kube-proxy in $mode mode (new connections served again after $outage s; TCP stream: $(sed -n 's/.*\(error=[^ ]*\).*/\1/p' <<<"$tcp") gap $(kpm44_gap "$tcp") s; UDP stream: $(sed -n 's/.*\(error=[^ ]*\).*/\1/p' <<<"$udp") gap $(kpm44_gap "$udp") s; control gap $(kpm44_gap "$control") s): the clean-up exits 0, kube-proxy serves TCP and UDP, its rules are there, no virtual server, kube-ipvs0 or KUBE- set of ipvsproxy's left" \
		no_failures "${failures[@]}"
}

scenario_44rbiptables() { kpm44_rollback_other_mode iptables; }
scenario_44rbnftables() { kpm44_rollback_other_mode nftables; }
