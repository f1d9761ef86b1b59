# 62-api-outage.sh — the API server unreachable from the nodes for 80 s, as a network outage
# between the nodes and the control plane looks to them.
#
# The proxiers reach the API server (192.0.2.100:6443, qemu's guestfwd to the host) from the
# node namespaces through the VM's root namespace, which forwards and masquerades their traffic.
# The outage is two DROP rules in the root namespace's FORWARD chain: only forwarded traffic (the
# nodes') is cut, in both directions and silently, as a lost route would; the admin e2ectl runs in
# the root namespace itself (OUTPUT, not FORWARD) and still writes to the API, and the host's
# API server, shared with nothing else but this run's VM, is never touched.
#
# During the outage: a stream through a ClusterIP (from c1) and one through a NodePort (from the
# outside client) keep flowing; new connections to the ClusterIP and to both nodes' NodePort
# are answered; the kernel state of both nodes (IPVS without its connection counters, ipset
# save, iptables-save and ip6tables-save without counters, kube-ipvs0's addresses and routes)
# stays exactly as before; /livez and /healthz answer 200 throughout, /readyz may turn 503 once
# a list or watch has failed, naming it under listFailures (docs/architecture.md, docs/rbac.md).
# Changes written meanwhile (an endpoint removed and another added to one Service, a new
# Service) must not reach the kernel before the API returns, and must after: the time from
# restoring the path to each node's kernel and to the first answer through the new Service is
# printed.
#
# How long that takes is client-go's. With the packets dropped nothing fails at once: the
# watches' HTTP/2 connection is found dead by its ping (30 s idle, 15 s to answer; the log says
# "watch ended with error ... client connection lost"), the reflector starts over with a
# watch-list whose request retries each timed-out dial (net.Dialer 30 s, Retry-After 1 s, 10
# times) before the reflector sees an error. So /readyz, which turns 503 on a failed list, may
# stay 200 through such an outage (docs/architecture.md). At the return a dial in progress
# connects at its SYN's next retransmission (1 s apart four times, then 2, 4, 8 s: at most about
# 12 s before the dial's 30 s are up and a new one starts at once), then the watch-list and a
# sync follow. Had an error reached the reflector, its backoff (800 ms doubling to 30 s, jitter
# 1.0: [30, 60) s at the cap, tools/cache/reflector.go) would add to that: more than
# outage62_recovery_max seconds fails.
#
# The three Services are dual-stack (RequireDualStack, each endpoint's IPv4 and IPv6 address), so
# the outage is also measured over IPv6 (verdict 62v6): a stream through the IPv6 cluster IP from
# c1 and one through node1's IPv6 node port from the client, a new connection each round (from c2
# to the IPv6 cluster IP and from the client to node2's IPv6 node port in turn), and after the return
# new62's IPv6 virtual server and moving62's IPv6 swap in each kernel, new62 answering over IPv6
# and moving62's IPv6 cluster IP sending c2 to s3, each timed like their IPv4 twins. (The kernel
# snapshots, verdict 62, hold both families' state.)

# The streams' helpers (the Go scenarios 60 and 61 have their own, in e2e/suite/draining_test.go).
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

readonly outage62_seconds=80 outage62_recovery_max=90 outage62_nodeport=30162
readonly outage62_comment=e2e-outage-62

# outage62_rules ACTION: add (-I) or delete (-D) the DROP rules for the nodes' API traffic.
outage62_rules() {
	iptables -w "$1" FORWARD -s 198.51.100.0/24 -d "$E2E_HOST_ADDR" -p tcp --dport 6443 \
		-m comment --comment "$outage62_comment" -j DROP &&
		iptables -w "$1" FORWARD -s "$E2E_HOST_ADDR" -p tcp --sport 6443 -d 198.51.100.0/24 \
			-m comment --comment "$outage62_comment" -j DROP
}

# outage62_end: delete the rules, however many were added.
outage62_end() {
	while iptables -w -S FORWARD 2>/dev/null | grep -q -- "$outage62_comment"; do
		outage62_rules -D 2>/dev/null || break
	done
}

# kernel62 NODE: what the proxier wrote into NODE, without what traffic changes (IPVS connection
# counts, chain and rule counters), in a stable order.
kernel62() {
	local n=$1
	echo "== ipvsadm -Ln"
	ip netns exec "$n" ipvsadm -Ln | awk '$1 == "->" { print $1, $2, $3, $4; next } { print }'
	echo "== ipset save"
	ip netns exec "$n" ipset save | sort
	echo "== iptables-save"
	ip netns exec "$n" iptables-save | grep -v '^#' | sed -E 's/ ?\[[0-9]+:[0-9]+\]//'
	echo "== ip6tables-save"
	ip netns exec "$n" ip6tables-save | grep -v '^#' | sed -E 's/ ?\[[0-9]+:[0-9]+\]//'
	echo "== kube-ipvs0"
	ip -n "$n" -o addr show dev kube-ipvs0 | awk '{ print $4 }' | sort
	ip -n "$n" route show table local dev kube-ipvs0
	ip -n "$n" -6 route show table local dev kube-ipvs0
}

# health62 NODE PATH: the HTTP code of the proxier's PATH on :10256 ("000" when nothing answers).
health62() {
	ip netns exec "$1" curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:10256$2"
}

# sample62_health T0 LOG: one line per proxier and endpoint ("SECONDS NODE PATH CODE", seconds
# since T0) in LOG; the body of each node's first 503 from /readyz is kept.
sample62_health() {
	local n path code
	for n in node1 node2; do
		for path in /livez /healthz /readyz; do
			code=$(health62 "$n" "$path")
			echo "$(since "$1") $n $path $code" >>"$2"
			[[ $path == /readyz && $code == 503 && ! -e $E2E_LOGS/scenario-62-readyz-$n.json ]] &&
				ip netns exec "$n" curl -s --max-time 2 http://127.0.0.1:10256/readyz >"$E2E_LOGS/scenario-62-readyz-$n.json"
		done
	done
}

# api62 NODE: the HTTP code the API server answers the node's /livez with ("000": unreachable).
api62() {
	ip netns exec "$1" curl -sk -o /dev/null -w '%{http_code}' --max-time 3 "https://$E2E_HOST_ADDR:6443/livez"
}

# real_servers62 SNAPSHOT VS: the real server lines of virtual server VS (TCP) in a kernel62
# snapshot; another Service's real server at the same address (a scenario before this one may
# leave one) does not count.
real_servers62() {
	awk -v vs="$2" '$1 == "TCP" || $1 == "UDP" || $1 == "SCTP" { in_vs = ($1 == "TCP" && $2 == vs); next }
		in_vs && $1 == "->" { print $2 }' "$1"
}

# hostname62 WHERE URL: the hostname= of one answer, empty when none came.
hostname62() {
	ip netns exec "$1" curl -gs --max-time 2 "$2" | sed -n 's/^hostname=//p'
}

# moved62 NODE VS [FAMILY]: the endpoint change written during the outage is in NODE's kernel: s3
# is a real server at weight 1 and web, removed, is gone or at weight 0 (drained).
moved62() {
	local w_web w_s3 fam=${3:-4}
	w_web=$(weight_of "$1" tcp "$2" "$(bracketed "$(pod_addr $fam web)"):8080")
	w_s3=$(weight_of "$1" tcp "$2" "$(bracketed "$(pod_addr $fam s3)"):8080")
	[[ $w_s3 == 1 && (-z $w_web || $w_web == 0) ]]
}

# recovered62 COND NEW_IP MOVING_IP NEW_IP6 MOVING_IP6: one condition of the return. kernel-NODE:
# NODE's kernel has new62 with s3 and moving62's swap; traffic-POD: new62 answers POD from s3;
# moved-c2: moving62 sends a new connection of c2 to s3, the added endpoint; kernel6-NODE,
# traffic6-POD, moved6-c2: the same on the IPv6 cluster IPs; readyz-NODE: NODE's /readyz is 200.
recovered62() {
	case $1 in
	kernel-node*)
		[[ "$(real_servers "${1#kernel-}" tcp "$2:8064" | tr -d '\n')" == "$(pod_ip s3):8080" ]] && moved62 "${1#kernel-}" "$3:8063" ;;
	kernel6-node*)
		[[ "$(real_servers "${1#kernel6-}" tcp "[$4]:8064" | tr -d '\n')" == "[$(pod_ip6 s3)]:8080" ]] && moved62 "${1#kernel6-}" "[$5]:8063" 6 ;;
	traffic-*) [[ $(hostname62 "${1#traffic-}" "http://$2:8064/") == s3 ]] ;;
	traffic6-*) [[ $(hostname62 "${1#traffic6-}" "http://[$4]:8064/") == s3 ]] ;;
	moved-c2) [[ $(hostname62 c2 "http://$3:8063/") == s3 ]] ;;
	moved6-c2) [[ $(hostname62 c2 "http://[$5]:8063/") == s3 ]] ;;
	readyz-node*) [[ $(health62 "${1#readyz-}" /readyz) == 200 ]] ;;
	*) return 1 ;;
	esac
}

scenario_62() {
	heading "The API server unreachable from the nodes for ${outage62_seconds}s: Services keep working, nothing is removed, changes follow its return"
	local failures=() failures6=() info steady_ip moving_ip new_ip steady_ip6 moving_ip6 new_ip6
	info=$(kc apply-service - <<YAML
apiVersion: v1
kind: Service
metadata: {name: steady62}
spec:
  type: NodePort
  ipFamilyPolicy: RequireDualStack
  ports: [{port: 8062, targetPort: 8080, nodePort: $outage62_nodeport, protocol: TCP}]
YAML
) || { verdict 62 "API outage: Service" false; return; }
	steady_ip=$(cluster_ip_of 4 "$info") steady_ip6=$(cluster_ip_of 6 "$info")
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: moving62}
spec:
  ipFamilyPolicy: RequireDualStack
  ports: [{port: 8063, targetPort: 8080, protocol: TCP}]
YAML
) || { verdict 62 "API outage: Service" false; return; }
	moving_ip=$(cluster_ip_of 4 "$info") moving_ip6=$(cluster_ip_of 6 "$info")
	kc set-endpoints steady62 $(dual_endpoints web@node1 s2@node2) &&
		kc set-endpoints moving62 $(dual_endpoints web@node1 s2@node2) ||
		{ verdict 62 "API outage: endpoints" false; verdict 62v6 "API outage over IPv6: endpoints" false; return; }
	show - "e2ectl apply-service steady62.yaml (NodePort $outage62_nodeport) moving62.yaml  # RequireDualStack; e2ectl set-endpoints steady62|moving62 web@node1 s2@node2  # IPv4 and IPv6" \
		"steady62 $steady_ip [$steady_ip6], moving62 $moving_ip [$moving_ip6]"
	local want="$(pod_ip web):8080 $(pod_ip s2):8080" want6="[$(pod_ip6 web)]:8080 [$(pod_ip6 s2)]:8080" n
	for n in node1 node2; do
		wait_real_servers "$n" tcp "$steady_ip:8062" "$want" || failures+=("$n: steady62 not programmed")
		wait_real_servers "$n" tcp "$moving_ip:8063" "$want" || failures+=("$n: moving62 not programmed")
		wait_real_servers "$n" tcp "[$steady_ip6]:8062" "$want6" || failures6+=("$n: steady62's IPv6 cluster IP not programmed")
		wait_real_servers "$n" tcp "[$moving_ip6]:8063" "$want6" || failures6+=("$n: moving62's IPv6 cluster IP not programmed")
		wait_real_servers "$n" tcp "[$(node_addr6_of $n)]:$outage62_nodeport" "$want6" || failures6+=("$n: steady62's IPv6 node port not programmed")
		wait_until 30 bash -c "[[ \$(ip netns exec $n curl -s -o /dev/null -w '%{http_code}' --max-time 2 http://127.0.0.1:10256/readyz) == 200 ]]" ||
			failures+=("$n: /readyz not 200 before the outage")
	done

	local log_c=$E2E_LOGS/stream-62-clusterip.log log_n=$E2E_LOGS/stream-62-nodeport.log pid_c pid_n
	local log_c6=$E2E_LOGS/stream-62-clusterip6.log log_n6=$E2E_LOGS/stream-62-nodeport6.log pid_c6 pid_n6
	stream_start c1 "$steady_ip" 8062 "$log_c"
	pid_c=$stream_pid
	stream_start client "$node1_addr" "$outage62_nodeport" "$log_n"
	pid_n=$stream_pid
	stream_start c1 "[$steady_ip6]" 8062 "$log_c6"
	pid_c6=$stream_pid
	stream_start client "[$node1_addr6]" "$outage62_nodeport" "$log_n6"
	pid_n6=$stream_pid
	wait_until 20 grep -q seq= "$log_c" || failures+=("no stream line through $steady_ip:8062")
	wait_until 20 grep -q seq= "$log_n" || failures+=("no stream line through $node1_addr:$outage62_nodeport")
	wait_until 20 grep -q seq= "$log_c6" || failures6+=("no stream line through [$steady_ip6]:8062")
	wait_until 20 grep -q seq= "$log_n6" || failures6+=("no stream line through [$node1_addr6]:$outage62_nodeport")
	ask node1 "curl -sk -o /dev/null -w '%{http_code}' --max-time 3 https://$E2E_HOST_ADDR:6443/livez  # the API from the node"
	[[ $answer =~ ^[1-5][0-9][0-9]$ ]] || failures+=("the API server does not answer node1 before the outage: '$answer'")
	local snap=$E2E_LOGS/scenario-62-kernel
	for n in node1 node2; do kernel62 "$n" >"$snap-before-$n.txt" 2>&1; done

	# The outage.
	local t_cut t_restore
	outage62_rules -I || {
		outage62_end
		stream_stop "$pid_c"; stream_stop "$pid_n"; stream_stop "$pid_c6"; stream_stop "$pid_n6"
		verdict 62 "API outage: iptables in the VM's root namespace" false
		verdict 62v6 "API outage over IPv6: iptables in the VM's root namespace" false
		return
	}
	t_cut=$(now)
	show - "iptables -I FORWARD -s 198.51.100.0/24 -d $E2E_HOST_ADDR -p tcp --dport 6443 -j DROP; iptables -I FORWARD -s $E2E_HOST_ADDR -p tcp --sport 6443 -d 198.51.100.0/24 -j DROP" ""
	ask node1 "curl -sk -o /dev/null -w '%{http_code}' --max-time 3 https://$E2E_HOST_ADDR:6443/livez  # the API from the node"
	[[ $answer == 000* ]] || failures+=("node1 still reaches the API server during the outage: '$answer'")

	# Changes through the admin path, which the outage leaves alone.
	local t_changed
	kc set-endpoints moving62 $(dual_endpoints s2@node2 s3@node1) || failures+=("set-endpoints moving62 during the outage failed")
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: new62}
spec:
  ipFamilyPolicy: RequireDualStack
  ports: [{port: 8064, targetPort: 8080, protocol: TCP}]
YAML
) || failures+=("apply-service new62 during the outage failed: $info")
	new_ip=$(cluster_ip_of 4 "$info") new_ip6=$(cluster_ip_of 6 "$info")
	kc set-endpoints new62 $(dual_endpoints s3@node1) || failures+=("set-endpoints new62 during the outage failed")
	t_changed=$(since "$t_cut")
	show - "e2ectl set-endpoints moving62 s2@node2 s3@node1  # web removed, s3 added; e2ectl apply-service new62.yaml; e2ectl set-endpoints new62 s3@node1  (admin, from the VM's root namespace)" \
		"new62 $new_ip [$new_ip6]; written ${t_changed}s into the outage"

	# Through the outage, in rounds a second apart: new connections, the health endpoints, the
	# kernel once past the middle; the kernel again at the end, then the return.
	local deadline tries=0 refused=() refused6=() health_log=$E2E_LOGS/scenario-62-health.log mid_taken=
	: >"$health_log"
	rm -f "$E2E_LOGS"/scenario-62-readyz-node*.json
	deadline=$(awk -v a="$t_cut" -v d="$((outage62_seconds - 10))" 'BEGIN { printf "%.3f", a + d }')
	while awk -v d="$deadline" -v t="$(now)" 'BEGIN { exit !(t < d) }'; do
		tries=$((tries + 1))
		[[ -n $(hostname62 c2 "http://$steady_ip:8062/") ]] || refused+=("c2 -> $steady_ip:8062 at $(since "$t_cut")s")
		[[ -n $(hostname62 client "http://$node1_addr:$outage62_nodeport/") ]] || refused+=("client -> node1:$outage62_nodeport at $(since "$t_cut")s")
		[[ -n $(hostname62 client "http://$node2_addr:$outage62_nodeport/") ]] || refused+=("client -> node2:$outage62_nodeport at $(since "$t_cut")s")
		# One IPv6 connection a round, the two paths in turn: a round costs seconds under emulation.
		if ((tries % 2)); then
			[[ -n $(hostname62 c2 "http://[$steady_ip6]:8062/") ]] || refused6+=("c2 -> [$steady_ip6]:8062 at $(since "$t_cut")s")
		else
			[[ -n $(hostname62 client "http://[$node2_addr6]:$outage62_nodeport/") ]] || refused6+=("client -> [$node2_addr6]:$outage62_nodeport at $(since "$t_cut")s")
		fi
		sample62_health "$t_cut" "$health_log"
		if [[ -z $mid_taken ]] && awk -v a="$t_cut" -v t="$(now)" 'BEGIN { exit !(t - a >= 30) }'; then
			for n in node1 node2; do kernel62 "$n" >"$snap-mid-$n.txt" 2>&1; done
			mid_taken=$(since "$t_cut")
		fi
		sleep 1
	done
	for n in node1 node2; do kernel62 "$n" >"$snap-end-$n.txt" 2>&1; done
	local end_taken api_end sockets
	end_taken=$(since "$t_cut")
	api_end=$(api62 node2)
	sample62_health "$t_cut" "$health_log"
	# What the proxier's connections to the API server are doing as it returns (ss -o: a SYN's
	# retransmission timer, the established connection).
	sockets=$(ip netns exec node1 ss -Htno state all "( dport = :6443 )" | awk '{ printf "%s%s %s", sep, $1, $NF; sep = "; " }')

	# The API returns.
	outage62_end
	t_restore=$(now)
	local wall_restore wall_cut
	wall_restore=$(date -u -d "@$t_restore" +%T.%N | cut -c1-12) wall_cut=$(date -u -d "@$t_cut" +%T.%N | cut -c1-12)
	# Each condition polled by its own loop, so that a slow one does not delay another's time.
	local conds="kernel-node1 kernel-node2 traffic-c1 traffic-c2 moved-c2 readyz-node1 readyz-node2" c pollers=() times times6
	local conds6="kernel6-node1 kernel6-node2 traffic6-c1 traffic6-c2 moved6-c2"
	rm -f "$E2E_LOGS"/scenario-62-recovered-*
	for c in $conds $conds6; do
		(
			until recovered62 "$c" "$new_ip" "$moving_ip" "$new_ip6" "$moving_ip6"; do
				awk -v a="$t_restore" -v t="$(now)" -v m="$outage62_recovery_max" 'BEGIN { exit !(t - a < m) }' || exit 1
				sleep 0.2
			done
			since "$t_restore" >"$E2E_LOGS/scenario-62-recovered-$c"
		) &
		pollers+=($!)
	done
	wait "${pollers[@]}"
	times=$(for c in $conds; do printf '%s %s, ' "$c" "$(sed 's/$/s/' "$E2E_LOGS/scenario-62-recovered-$c" 2>/dev/null | grep . || echo never)"; done)
	times6=$(for c in $conds6; do printf '%s %s, ' "$c" "$(sed 's/$/s/' "$E2E_LOGS/scenario-62-recovered-$c" 2>/dev/null | grep . || echo never)"; done)
	for c in $conds; do
		[[ -s $E2E_LOGS/scenario-62-recovered-$c ]] || failures+=("$c: not within ${outage62_recovery_max}s of the API's return")
	done
	for c in $conds6; do
		[[ -s $E2E_LOGS/scenario-62-recovered-$c ]] || failures6+=("$c: not within ${outage62_recovery_max}s of the API's return")
	done
	show - "iptables -D FORWARD ... (both rules)  # at $wall_restore, $(awk -v a="$t_cut" -v b="$t_restore" 'BEGIN { printf "%.1f", b - a }')s after the cut at $wall_cut" \
		"node1's sockets to :6443 then: ${sockets:-none}"

	# The outage, as recorded.
	[[ $api_end == 000* ]] || failures+=("node2 reached the API server at the outage's end: '$api_end'")
	((${#refused[@]} == 0)) || failures+=("new connections failed during the outage: ${refused[*]}")
	((${#refused6[@]} == 0)) || failures6+=("new IPv6 connections failed during the outage: ${refused6[*]}")
	show - "# in rounds through the outage: c2 -> $steady_ip:8062, client -> node1:$outage62_nodeport and node2:$outage62_nodeport, then each proxier's /livez, /healthz, /readyz" \
		"$tries rounds (one every $(awk -v d="$end_taken" -v n="$tries" 'BEGIN { printf "%.1f", d / n }')s), $((3 * tries - ${#refused[@]})) of $((3 * tries)) answered; node2 -> API at the end: $api_end"
	show - "# in the same rounds, in turn: c2 -> [$steady_ip6]:8062, client -> [$node2_addr6]:$outage62_nodeport" \
		"$((tries - ${#refused6[@]})) of $tries answered"
	local diffs=""
	for n in node1 node2; do
		for when in mid end; do
			[[ $when == mid && -z $mid_taken ]] && continue
			if ! diff -u "$snap-before-$n.txt" "$snap-$when-$n.txt" >"$snap-diff-$when-$n.txt"; then
				failures+=("$n's kernel changed during the outage ($when): $(grep -E '^[-+][^-+]' "$snap-diff-$when-$n.txt" | head -n 6 | tr '\n' ';')")
				diffs+=" $n/$when"
			fi
		done
	done
	show - "# kernel of both nodes before, ${mid_taken:-?}s and ${end_taken}s into the outage: ipvsadm -Ln (no counts), ipset save, iptables-save, ip6tables-save, kube-ipvs0" \
		"$(wc -l <"$snap-before-node1.txt") and $(wc -l <"$snap-before-node2.txt") lines; ${diffs:+changed:}${diffs:-identical}"
	# The changes did not reach the kernel during the outage (the identical snapshots say so too;
	# this names them).
	for n in node1 node2; do
		grep -qF "$new_ip:8064" "$snap-end-$n.txt" && failures+=("new62 reached $n's kernel during the outage")
		real_servers62 "$snap-end-$n.txt" "$moving_ip:8063" | grep -qxF "$(pod_ip s3):8080" && failures+=("moving62's added endpoint reached $n's kernel during the outage")
		grep -qF "[$new_ip6]:8064" "$snap-end-$n.txt" && failures6+=("new62's IPv6 cluster IP reached $n's kernel during the outage")
		real_servers62 "$snap-end-$n.txt" "[$moving_ip6]:8063" | grep -qxF "[$(pod_ip6 s3)]:8080" && failures6+=("moving62's added IPv6 endpoint reached $n's kernel during the outage")
	done
	local health_summary
	health_summary=$(awk '{ k = $2 " " $3; c[k] = c[k] ? (index(c[k], $4) ? c[k] : c[k] "," $4) : $4 } END { for (k in c) print k "=" c[k] }' "$health_log" | sort | tr '\n' ' ')
	show - "# /livez, /healthz, /readyz of both proxiers during the outage (codes seen)" "$health_summary"
	awk '($3 == "/livez" || $3 == "/healthz") && $4 != 200' "$health_log" | grep -q . &&
		failures+=("/livez or /healthz not 200 during the outage: $(awk '($3 == "/livez" || $3 == "/healthz") && $4 != 200' "$health_log" | head -n 3 | tr '\n' ';')")
	awk '$3 == "/readyz" && $4 != 200 && $4 != 503' "$health_log" | grep -q . && failures+=("/readyz answered neither 200 nor 503 during the outage")
	local body
	for n in node1 node2; do
		[[ -e $E2E_LOGS/scenario-62-readyz-$n.json ]] || continue
		body=$(<"$E2E_LOGS/scenario-62-readyz-$n.json")
		show "$n" "curl http://127.0.0.1:10256/readyz  # its first 503, $(awk -v n="$n" '$2 == n && $3 == "/readyz" && $4 == 503 { print $1 "s into the outage"; exit }' "$health_log")" "$body"
		[[ $body == *listFailures* ]] || failures+=("$n's /readyz 503 does not name a list failure: $body")
	done
	# What client-go said meanwhile (node1; in full in scenario-62-reflector-node1.log).
	awk -v from="$wall_cut" '$2 >= from && /reflector|Failed to/' "$E2E_LOGS/ipvsproxy-node1.log" >"$E2E_LOGS/scenario-62-reflector-node1.log"
	show node1 "# the proxier's log from the cut: reflector lines (time, type, error)" \
		"$(sed -E 's/^[IWE][0-9]+ ([0-9:.]{12})[0-9]* .*type="\*v1\.([A-Za-z]+)".*err="(.*)"$/\1 \2: \3/; s/an error on the server \(\\"unable to decode an event from the watch stream: ([^\\]*)\\"\).*/\1/' "$E2E_LOGS/scenario-62-reflector-node1.log" | cut -c1-90 | tr '\n' ';')"

	show - "# after the API's return: each node's kernel has new62 (s3) and moving62 without web, with s3; new62 answers c1 and c2; moving62 sends c2 to s3; /readyz 200" \
		"${times%, }"
	show - "# the same over IPv6: new62 [$new_ip6] and moving62 [$moving_ip6] in each kernel, new62 answers c1 and c2, moving62 sends c2 to s3" \
		"${times6%, }"
	# And web, removed from moving62, gets no new connection.
	local got=() got6=() i
	for i in 1 2 3 4 5 6; do got+=("$(hostname62 c1 "http://$moving_ip:8063/")"); done
	show c1 "for i in 1..6; do curl -s http://$moving_ip:8063/ | grep hostname=; done" "${got[*]}"
	[[ " ${got[*]} " == *" web "* || " ${got[*]} " == *"  "* ]] && failures+=("moving62 after the outage answered from: ${got[*]}, want s2 and s3 only")
	for i in 1 2 3 4 5 6; do got6+=("$(hostname62 c1 "http://[$moving_ip6]:8063/")"); done
	show c1 "for i in 1..6; do curl -s http://[$moving_ip6]:8063/ | grep hostname=; done" "${got6[*]}"
	[[ " ${got6[*]} " == *" web "* || " ${got6[*]} " == *"  "* ]] && failures6+=("moving62's IPv6 cluster IP after the outage answered from: ${got6[*]}, want s2 and s3 only")

	# The streams: unbroken across the outage and the return.
	local t_end gap_c gap_n after_c after_n gap_c6 gap_n6 after_c6 after_n6
	t_end=$(now)
	after_c=$(stream_from "$log_c" "$t_restore") after_n=$(stream_from "$log_n" "$t_restore")
	after_c6=$(stream_from "$log_c6" "$t_restore") after_n6=$(stream_from "$log_n6" "$t_restore")
	stream_stop "$pid_c"
	stream_stop "$pid_n"
	stream_stop "$pid_c6"
	stream_stop "$pid_n6"
	gap_c=$(stream_gap "$log_c" "$t_cut" "$t_end") gap_n=$(stream_gap "$log_n" "$t_cut" "$t_end")
	gap_c6=$(stream_gap "$log_c6" "$t_cut" "$t_end") gap_n6=$(stream_gap "$log_n6" "$t_cut" "$t_end")
	show - "# the streams from the cut to now: largest gap between lines" \
		"c1 -> $steady_ip:8062 $gap_c; client -> node1:$outage62_nodeport $gap_n"
	[[ -n $after_c ]] || failures+=("the ClusterIP stream has no line after the API's return")
	[[ -n $after_n ]] || failures+=("the NodePort stream has no line after the API's return")
	local g
	for g in "${gap_c%% *}" "${gap_n%% *}"; do
		awk -v g="$g" -v m="$stream_line_gap_max" 'BEGIN { exit !(g < m) }' || failures+=("a stream's largest gap was $g s, want < $stream_line_gap_max s")
	done
	show - "# the IPv6 streams from the cut to now: largest gap between lines" \
		"c1 -> [$steady_ip6]:8062 $gap_c6; client -> [$node1_addr6]:$outage62_nodeport $gap_n6"
	[[ -n $after_c6 ]] || failures6+=("the IPv6 ClusterIP stream has no line after the API's return")
	[[ -n $after_n6 ]] || failures6+=("the IPv6 NodePort stream has no line after the API's return")
	for g in "${gap_c6%% *}" "${gap_n6%% *}"; do
		awk -v g="$g" -v m="$stream_line_gap_max" 'BEGIN { exit !(g < m) }' || failures6+=("an IPv6 stream's largest gap was $g s, want < $stream_line_gap_max s")
	done

	kc delete-service steady62 >/dev/null
	kc delete-service moving62 >/dev/null
	kc delete-service new62 >/dev/null
	for n in node1 node2; do
		wait_until 60 vs_gone "$n" "$steady_ip" || failures+=("$n still has steady62's virtual servers")
		[[ -z $new_ip ]] || wait_until 60 vs_gone "$n" "$new_ip" || failures+=("$n still has new62's virtual server")
		wait_until 60 vs_gone "$n" "[$steady_ip6]" || failures6+=("$n still has steady62's IPv6 virtual servers")
		[[ -z $new_ip6 ]] || wait_until 60 vs_gone "$n" "[$new_ip6]" || failures6+=("$n still has new62's IPv6 virtual server")
	done
	verdict 62 "API unreachable from the nodes for $(awk -v a="$t_cut" -v b="$t_restore" 'BEGIN { printf "%.0f", b - a }')s: streams flowed (largest gaps ${gap_c%% *}/${gap_n%% *} s), $((3 * tries - ${#refused[@]}))/$((3 * tries)) new connections answered, kernels ${diffs:+changed:}${diffs:-identical}, /livez and /healthz 200 (/readyz: $(awk '$3 == "/readyz" { c[$4]++ } END { for (k in c) { printf "%s%s x%d", s, k, c[k]; s = " " } }' "$health_log")); after the return: ${times%, }" \
		no_failures "${failures[@]}"
	verdict 62v6 "API outage over IPv6: streams through [$steady_ip6]:8062 and [$node1_addr6]:$outage62_nodeport flowed (largest gaps ${gap_c6%% *}/${gap_n6%% *} s), $((tries - ${#refused6[@]}))/$tries new IPv6 connections answered; after the return: ${times6%, }" \
		no_failures "${failures6[@]}"
}
