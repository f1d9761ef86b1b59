# 35-conntrack-reconcile.sh — UDP conntrack is reconciled, not only event-driven (issue 8 item 2,
# kubernetes#112604). A daemon that dies between removing a real server and deleting its flows
# (or whose delete failed) leaves a client's UDP flow pointing at the dead endpoint: IPVS never
# rewrites a confirmed flow, so the client's datagrams keep going nowhere for as long as it sends.
# Here the daemon is stopped, the endpoint deleted and its real server removed by hand — what the
# daemon had done just before it died — and the daemon started again: its first full sync must
# find the flow whose reply source is no real server and delete it, so replies resume from the
# live endpoint. Before the reconciler, the restarted daemon saw nothing to change and the flow
# stayed stale.

readonly ct35_src_port=40035 ct35_a=10.244.1.35 ct35_b=10.244.2.35

scenario_35() {
	heading "UDP flows are reconciled: a flow left stale by a crash is deleted by the restarted daemon"
	# Pods of its own, so that this runs after scenario 8 (which deletes one) or alone.
	"$topo" add-pod node1 u35a "$ct35_a" >/dev/null && "$topo" echo u35a -http '' -udp :8081 &&
		"$topo" add-pod node2 u35b "$ct35_b" >/dev/null && "$topo" echo u35b -http '' -udp :8081 ||
		{ verdict 35 "UDP reconcile: pods" false; return; }
	local info ip
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: udp35}
spec:
  ports: [{port: 5353, targetPort: 8081, protocol: UDP}]
YAML
) || { verdict 35 "UDP reconcile: Service" false; return; }
	ip=$(field CLUSTER_IP "$info")
	kc set-endpoints udp35 "$ct35_a@node1" "$ct35_b@node2" || { verdict 35 "UDP reconcile: endpoints" false; return; }
	show - "e2ectl apply-service udp35.yaml && e2ectl set-endpoints udp35 $ct35_a@node1 $ct35_b@node2  # UDP 5353 -> 8081" "CLUSTER_IP=$ip"
	wait_real_servers node1 udp "$ip:5353" "$ct35_a:8081 $ct35_b:8081"

	local replies=$E2E_LOGS/udp35-replies.log
	: >"$replies"
	ip netns exec c1 bash -c "
		while sleep 0.3; do echo ping; done |
			socat - UDP:$ip:5353,sourceport=$ct35_src_port |
			while read -r line; do [[ \$line == hostname=* ]] && echo \"\$(date +%s.%N) \$line\"; done" >>"$replies" 2>&1 &
	local sender=$!
	wait_until 30 grep -q hostname= "$replies"
	sleep 1
	local victim survivor victim_ip
	victim=$(awk '{ sub(/^hostname=/, "", $2); print $2 }' "$replies" | sort -u | tr '\n' ' ' | sed 's/ $//')
	case $victim in
	u35a) survivor=u35b victim_ip=$ct35_a ;;
	u35b) survivor=u35a victim_ip=$ct35_b ;;
	*)
		kill_tree "$sender"
		verdict 35 "UDP reconcile: one flow reaches one endpoint" bash -c "echo 'replies from: ${victim:-nobody}'; exit 1"
		return
		;;
	esac
	note "the flow from source port $ct35_src_port reaches $victim; stop node1's daemon, then remove $victim as it would have"
	stop_proxier node1 TERM
	# SIGTERM leaves the kernel state in place: the virtual server keeps both real servers.
	local kept
	kept=$(real_servers node1 udp "$ip:5353" | tr '\n' ' ' | sed 's/ $//')
	show node1 "ipvsadm -Ln -u $ip:5353  # after SIGTERM" "real servers: $kept"
	"$topo" del-pod "$victim"
	kc delete-endpoint udp35 "$victim_ip" >/dev/null
	# The daemon's last act before dying: the real server is gone, its flow is not.
	ip netns exec node1 ipvsadm -d -u "$ip:5353" -r "$victim_ip:8081"
	show node1 "ipvsadm -d -u $ip:5353 -r $victim_ip:8081; conntrack -L -p udp --orig-dst $ip  # daemon stopped" \
		"$(ip netns exec node1 conntrack -L -p udp --orig-dst "$ip" 2>/dev/null)"
	local t0
	t0=$(now)
	start_proxier node1
	# Under emulation the daemon needs seconds to list the API and sync; then one full sync.
	local limit=$((60 + 2 * ${sync_period%s})) resumed
	while (($(since "$t0" | cut -d. -f1) <= limit)); do
		awk -v t="$t0" -v h="hostname=$survivor" '$1 > t && $2 == h { found = 1 } END { exit !found }' "$replies" && break
		sleep 0.5
	done
	sleep 1
	kill_tree "$sender"
	resumed=$(awk -v t="$t0" -v h="hostname=$survivor" '$1 > t && $2 == h { printf "%.1f", $1 - t; exit }' "$replies")
	ask node1 "conntrack -L -p udp --orig-dst $ip 2>/dev/null"
	show node1 "curl -s 127.0.0.1:10249/metrics | grep ipvsproxy_conntrack_entries_deleted_total" \
		"$(metric node1 ipvsproxy_conntrack_entries_deleted_total)"
	"$topo" del-pod "$survivor" >/dev/null 2>&1
	local when=never
	[[ -z $resumed ]] || when="after ${resumed}s"
	verdict 35 "UDP reconcile: SIGTERM kept the real servers; after a restart over a stale flow to $victim, replies from $survivor within ${limit}s of the start ($when)" \
		bash -c "[[ '$kept' == '$ct35_a:8081 $ct35_b:8081' ]] || { echo 'after SIGTERM the real servers were: $kept'; exit 1; }
			[[ -n '$resumed' ]] || { echo 'the flow stayed stale: no reply from $survivor'; exit 1; }"
}
