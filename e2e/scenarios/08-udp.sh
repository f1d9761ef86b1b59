# 08-udp.sh — UDP and stale conntrack. A client keeps sending datagrams to a UDP Service from one
# socket (one source port), so they all belong to one conntrack flow and one IPVS connection.
# When the endpoint they reach is deleted, that flow still points at the dead address until the
# proxier deletes it (kube-proxy does the same: kubernetes/kubernetes#59368); replies must resume
# from the live endpoint within two periodic syncs of the EndpointSlice update.

readonly udp_src_port=40053

scenario_8() {
	heading "UDP: replies resume from a live endpoint after the endpoint is deleted"
	local info udp_ip
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: udp}
spec:
  ports: [{port: 53, targetPort: 8081, protocol: UDP}]
YAML
) || { verdict 8 "UDP" false; return; }
	udp_ip=$(field CLUSTER_IP "$info")
	show - "e2ectl apply-service udp.yaml && e2ectl set-endpoints udp $(pod_ip u1)@node1 $(pod_ip u2)@node2  # UDP 53 -> 8081" "CLUSTER_IP=$udp_ip"
	kc set-endpoints udp "$(pod_ip u1)@node1" "$(pod_ip u2)@node2" || { verdict 8 "UDP" false; return; }
	local want
	want=$(printf '%s:8081\n' "$(pod_ip u1)" "$(pod_ip u2)" | sort | tr '\n' ' ' | sed 's/ $//')
	wait_real_servers node1 udp "$udp_ip:53" "$want"

	# One socket, a datagram every 0.3 s; each reply's hostname= line stamped with its arrival.
	local replies=$E2E_LOGS/udp-replies.log
	: >"$replies"
	ip netns exec c1 bash -c "
		while sleep 0.3; do echo ping; done |
			socat - UDP:$udp_ip:53,sourceport=$udp_src_port |
			while read -r line; do [[ \$line == hostname=* ]] && echo \"\$(date +%s.%N) \$line\"; done" >>"$replies" 2>&1 &
	local sender=$!
	wait_until 30 grep -q hostname= "$replies"
	sleep 1
	local victim survivor
	victim=$(awk '{ sub(/^hostname=/, "", $2); print $2 }' "$replies" | sort -u | tr '\n' ' ' | sed 's/ $//')
	show c1 "while sleep 0.3; do echo ping; done | socat - UDP:$udp_ip:53,sourceport=$udp_src_port | grep hostname=  # replies so far" \
		"$(awk '{ print $2 }' "$replies" | uniq -c)"
	case $victim in
	u1) survivor=u2 ;;
	u2) survivor=u1 ;;
	*)
		kill_tree "$sender"
		verdict 8 "UDP: one flow reaches one endpoint" bash -c "echo 'replies from: ${victim:-nobody}'; exit 1"
		return
		;;
	esac
	note "the flow from source port $udp_src_port reaches $victim; delete $victim and its endpoint"
	"$topo" del-pod "$victim"
	local t_del
	t_del=$(now)
	kc delete-endpoint udp "$(pod_ip "$victim")" || { kill_tree "$sender"; verdict 8 "UDP: delete-endpoint" false; return; }
	# Time from here: the EndpointSlice is updated once e2ectl returned.
	local t0
	t0=$(now)
	show - "topology.sh del-pod $victim && e2ectl delete-endpoint udp $(pod_ip "$victim")  # took $(awk -v a="$t_del" -v b="$t0" 'BEGIN { printf "%.1f", b - a }')s" ""
	# Two periodic syncs: the longest the proxier may take to notice, were events missed.
	local limit=$((2 * ${sync_period%s})) resumed ipvs_trace=$E2E_LOGS/udp-ipvs.log
	: >"$ipvs_trace"
	while (($(since "$t0" | cut -d. -f1) <= limit)); do
		# node1's real servers over time; the stamps bracket ipvsadm, slow under emulation.
		local t_a rs
		t_a=$(since "$t0")
		rs=$(real_servers node1 udp "$udp_ip:53" | tr '\n' ' ')
		echo "+${t_a}s..+$(since "$t0")s real servers: $rs" >>"$ipvs_trace"
		awk -v t="$t0" -v h="hostname=$survivor" '$1 > t && $2 == h { found = 1 } END { exit !found }' "$replies" && break
		sleep 0.3
	done
	sleep 1 # a few more replies for the record
	kill_tree "$sender"
	resumed=$(awk -v t="$t0" -v h="hostname=$survivor" '$1 > t && $2 == h { printf "%.1f", $1 - t; exit }' "$replies")
	local lost
	lost=$(awk -v a="$t_del" -v t="$t0" 'BEGIN { printf "%.1f", t - a }')
	show c1 "# replies over time, seconds relative to the EndpointSlice update" \
		"$(awk -v t="$t0" '{ printf "%+.1fs %s\n", $1 - t, $2 }' "$replies" | awk '{ k = $2 } k != last { if (n) print first " .. " prev " " last " x" n; first = $1; n = 0 } { n++; prev = $1; last = k } END { if (n) print first " .. " prev " " last " x" n }')"
	show node1 "ipvsadm -Ln -u $udp_ip:53  # while waiting" "$(<"$ipvs_trace")"
	ask node1 "conntrack -L -p udp --orig-dst $udp_ip 2>/dev/null"
	verdict 8 "UDP: after deleting $victim, replies from $survivor within ${limit}s (after ${resumed:-never}s; e2ectl took ${lost}s)" \
		bash -c "[[ -n '$resumed' ]] && awk 'BEGIN { exit !($resumed <= $limit) }' ||
			{ echo 'no reply from $survivor within ${limit}s of the update'; exit 1; }"
}

# kill_tree PID: stop a background pipeline started in a network namespace, descendants first
# (from /proc, so nothing beyond the kernel and bash is needed).
kill_tree() {
	local c
	for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		kill_tree "$c"
	done
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}
