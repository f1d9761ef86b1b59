# 46-resync-shares.sh — issue 9: --ipvs-resync-shares. node2's daemon is restarted with 3 shares
# (the suite's period is $sync_period). Behind its back, one Service's virtual server is deleted
# and another's real server removed. A period between full ones lists the virtual servers, so the
# deleted one is back within one period and answers again; the real server is back within three
# periods (its share's, or the full one). Over four periods the daemon runs at most two full syncs
# (one every period with the default of 1 share).

scenario_46() {
	heading "--ipvs-resync-shares 3: a deleted virtual server back within a period, a removed real server within three"
	local info name a b failures=()
	for name in resync-a resync-b; do
		info=$(kc apply-service - <<YAML
apiVersion: v1
kind: Service
metadata: {name: $name}
spec:
  type: ClusterIP
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
YAML
) || { verdict 46 "resync shares" false; return; }
		kc set-endpoints "$name" "$(pod_ip web)@node1" "$(pod_ip s2)@node2" || { verdict 46 "resync shares" false; return; }
		if [[ $name == resync-a ]]; then a=$(field CLUSTER_IP "$info"); else b=$(field CLUSTER_IP "$info"); fi
	done
	local both
	both=$(printf '%s\n' "$(pod_ip web):8080" "$(pod_ip s2):8080" | sort | paste -sd ' ')

	stop_proxier node2
	E2E_PROXIER_ARGS="${E2E_PROXIER_ARGS:-} --ipvs-resync-shares 3" start_proxier node2
	show node2 "ipvsproxy run ... --ipvs-resync-shares 3" ""
	wait_until 60 proxier_synced node2 || failures+=("node2's proxier with --ipvs-resync-shares 3 did not sync")
	wait_real_servers node2 tcp "$a:80" "$both" || failures+=("node2 never programmed $a:80")
	wait_real_servers node2 tcp "$b:80" "$both" || failures+=("node2 never programmed $b:80")

	local full0 t0 took_vs took_rs
	full0=$(metric node2 ipvsproxy_sync_full_total)
	t0=$(now)
	ask node2 "ipvsadm -D -t $a:80 && ipvsadm -d -t $b:80 -r $(pod_ip s2):8080"
	wait_real_servers node2 tcp "$a:80" "$both" || failures+=("the deleted virtual server $a:80 is not back on node2 after $(since "$t0") s")
	took_vs=$(since "$t0")
	wait_until 45 real_servers_are node2 "$b:80" "$both" ||
		failures+=("the real server $(pod_ip s2):8080 of $b:80 is not back on node2 after $(since "$t0") s")
	took_rs=$(since "$t0")
	ask c2 "curl -s --max-time 5 $a | grep -c client_address"
	[[ $answer == 1 ]] || failures+=("c2 -> $a after its virtual server came back: '$answer'")
	# Four periods from the deletion: with 3 shares at most two of them are full.
	local wait_for
	wait_for=$(awk -v t="$(since "$t0")" -v p="${sync_period%s}" 'BEGIN { w = 4 * p - t; print (w > 0 ? w : 0) }')
	sleep "$wait_for"
	local fulls=$(($(metric node2 ipvsproxy_sync_full_total) - full0))
	((fulls <= 2)) || failures+=("node2 ran $fulls full syncs in four periods, want at most 2 with 3 shares")
	note "virtual server back after ${took_vs}s, real server after ${took_rs}s; $fulls full syncs in four periods of $sync_period"

	stop_proxier node2
	start_proxier node2
	wait_until 60 proxier_synced node2 || failures+=("node2's proxier did not sync after its restart with the suite's flags")
	kc delete-service resync-a >/dev/null
	kc delete-service resync-b >/dev/null
	# Scenario 9 compares the kernel across a restart: leave it settled.
	local node
	for node in node1 node2; do
		wait_until 60 vs_gone "$node" "$a" || failures+=("$node still has $a 60 s after its Service was deleted")
		wait_until 60 vs_gone "$node" "$b" || failures+=("$node still has $b 60 s after its Service was deleted")
	done
	verdict 46 "resync shares: deleted virtual server back in ${took_vs}s, removed real server in ${took_rs}s, answered again, at most 2 full syncs in 4 periods" \
		no_failures "${failures[@]}"
}

# real_servers_are NODE VIP:PORT WANT: the TCP virtual server's real servers are exactly WANT.
real_servers_are() {
	[[ "$(real_servers "$1" tcp "$2" | paste -sd ' ')" == "$3" ]]
}
