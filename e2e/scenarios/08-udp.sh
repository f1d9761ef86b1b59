# 08-udp.sh — UDP and stale conntrack. A client sends datagrams to a UDP Service from one fixed
# source port, so every datagram belongs to one conntrack flow (and one IPVS connection). When the
# endpoint it reaches is deleted, that flow still points at the dead address until the proxier
# deletes it (kube-proxy does the same: kubernetes/kubernetes#59368); replies must resume from
# the live endpoint within two periodic syncs.

scenario_8() {
	heading "UDP: replies resume from a live endpoint after the endpoint is deleted"
	local info
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
	local send="echo ping | socat -T0.5 - UDP:$udp_ip:53,sourceport=40053,reuseaddr | grep ^hostname="
	ask c1 "$send"
	local victim=${answer#hostname=} survivor
	case $victim in
	u1) survivor=u2 ;;
	u2) survivor=u1 ;;
	*) verdict 8 "UDP: first reply" false; return ;;
	esac
	ask c1 "$send"
	local again=$answer
	note "the flow from source port 40053 reaches $victim; delete $victim and its endpoint"
	"$topo" del-pod "$victim"
	kc delete-endpoint udp "$(pod_ip "$victim")" || { verdict 8 "UDP: delete-endpoint" false; return; }
	# Time from here: the EndpointSlice is updated once e2ectl returned.
	local t0
	t0=$(now)
	show - "topology.sh del-pod $victim && e2ectl delete-endpoint udp $(pod_ip "$victim")" ""
	# Two periodic syncs: the longest the proxier may take to notice, were events missed.
	local limit=$((2 * ${sync_period%s})) got= elapsed removed_at=never trace=$E2E_LOGS/udp-trace.log
	: >"$trace"
	while (($(since "$t0" | cut -d. -f1) <= limit)); do
		local rs t_try
		rs=$(real_servers node1 udp "$udp_ip:53" | tr '\n' ' ')
		t_try=$(since "$t0")
		if [[ $removed_at == never && $rs == "$(pod_ip "$survivor"):8081 " ]]; then
			removed_at="${t_try}s"
		fi
		got=$(ip netns exec c1 bash -c "$send" 2>/dev/null)
		elapsed=$(since "$t0")
		# Where the flow stood at each try (the time is when it was sent, under emulation programs
		# take a second to start): IPVS real servers before it, then the IPVS connection and the
		# conntrack entry of source port 40053, and the reply.
		printf '+%ss real servers [%s] ipvs conn [%s] conntrack [%s] reply [%s]\n' "$t_try" "$rs" \
			"$(ip netns exec node1 ipvsadm -Lnc | awk '$1 == "UDP" && $4 ~ /:40053$/ { print $2, $3, $6 }' | tr '\n' ' ')" \
			"$(ip netns exec node1 conntrack -L -p udp --orig-port-src 40053 2>/dev/null | awk '{ $1 = $2 = ""; print }' | tr '\n' ' ')" \
			"$got" >>"$trace"
		[[ $got == "hostname=$survivor" ]] && break
	done
	show node1 "cat udp-trace.log  # each try: IPVS real servers, IPVS connection (state, expiry, real server), conntrack (timeout, reply source), reply" "$(<"$trace")"
	ask node1 "conntrack -L -p udp --orig-dst $udp_ip 2>/dev/null"
	verdict 8 "UDP: after deleting $victim, replies from $survivor within ${limit}s (answered by ${elapsed}s; real server gone by $removed_at)" \
		bash -c "[[ '$again' == 'hostname=$victim' ]] || { echo 'the same source port reached $again, not $victim'; exit 1; }
			(( ${elapsed%.*} <= $limit )) || { echo 'took ${elapsed}s'; exit 1; }
			[[ '$got' == 'hostname=$survivor' ]] || { echo 'no reply from $survivor within ${limit}s (last: ${got:-nothing})'; exit 1; }"
}
