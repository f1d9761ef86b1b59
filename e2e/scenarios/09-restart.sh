# 09-restart.sh — a daemon restart must not disturb traffic: the new process adopts what the old
# one wrote instead of rewriting it. A pod on node1 sends requests without pause to a Service with
# three endpoints (restart9, its own) while node1's daemon is killed (SIGKILL, as an OOM kill or a node drain would) and
# started again. Evidence that nothing was rewritten:
#   - `ipvsadm -Ln` is the same before and after;
#   - the virtual servers' connection counters (`ipvsadm -Ln --stats`) only grew (a virtual
#     server deleted and added again would restart from 0);
#   - the iptables rules are the same and their packet counters only grew (an iptables-restore of
#     a chain resets its counters);
#   - the ipsets are the same;
#   - `ip monitor address link` and `xtables-monitor -e` in the node report no change at all
#     while the new daemon starts and syncs.
# The proxier logs "Sync finished ... writes=N" only at -v=2, which `ipvsproxy run` does not
# expose; the checks above see writes from outside instead.

scenario_9() {
	heading "Restart the daemon under load"
	local stop=/run/e2e-restart.stop log=$E2E_LOGS/restart-requests.log info ip
	rm -f "$stop" "$log"
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: restart9}
spec:
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
YAML
	) || { verdict 9 "restart under load: apply-service" false; return; }
	ip=$(field CLUSTER_IP "$info")
	kc set-endpoints restart9 "$(pod_ip web)@node1" "$(pod_ip s3)@node1" "$(pod_ip s2)@node2" ||
		{ verdict 9 "restart under load: set-endpoints" false; return; }
	show - "e2ectl apply-service restart9.yaml && e2ectl set-endpoints restart9 web s3 s2  # cluster IP $ip" ""
	wait_real_servers node1 tcp "$ip:80" "$(printf '%s:8080\n' "$(pod_ip web)" "$(pod_ip s3)" "$(pod_ip s2)" | sort | tr '\n' ' ' | sed 's/ $//')"
	ip netns exec c1 bash -c "
		while [[ ! -e $stop ]]; do
			curl -s -o /dev/null -w '%{http_code}\n' --max-time 3 http://$ip/ || echo failed
		done" >"$log" 2>&1 &
	local loop=$!
	sleep 2
	local ipvs_before stats_before ipt_before sets_before
	ipvs_before=$(ipvs_table node1)
	stats_before=$(vs_conns node1)
	ipt_before=$(ip netns exec node1 iptables-save -c)
	sets_before=$(ip netns exec node1 ipset list)

	# Watch the kernel for writes while the new daemon starts: address and link changes (kube-ipvs0)
	# and iptables rule changes (the nft back end reports every rule added or deleted).
	local mon_ip=$E2E_LOGS/restart-ip-monitor.log mon_ipt=$E2E_LOGS/restart-xtables-monitor.log
	ip netns exec node1 ip monitor address link >"$mon_ip" 2>&1 &
	local mon1=$!
	ip netns exec node1 xtables-monitor -e >"$mon_ipt" 2>&1 &
	local mon2=$!
	stop_proxier node1 KILL
	start_proxier node1
	show - "kill -KILL <node1's ipvsproxy>; ip netns exec node1 ipvsproxy run ... &" ""
	local synced=ok
	wait_until 120 proxier_synced node1 || synced=
	sleep 2 # requests after the first sync, too
	touch "$stop"
	wait "$loop"
	kill "$mon1" "$mon2" 2>/dev/null
	wait "$mon1" "$mon2" 2>/dev/null
	show node1 "ip monitor address link; xtables-monitor -e  # while the daemon restarted" "$(cat "$mon_ip" "$mon_ipt")"
	local monitored
	monitored=$(cat "$mon_ip" "$mon_ipt")

	local codes
	codes=$(sort "$log" | uniq -c)
	show c1 "sort restart-requests.log | uniq -c  # HTTP codes of the requests made meanwhile" "$codes"
	ask node1 "ipvsadm -Ln | awk '\$1 == \"->\" { print \$1, \$2, \$3, \$4; next } { print }'  # compared with before the restart, without the connection counts"
	local ipvs_after=$answer stats_after ipt_after sets_after
	stats_after=$(vs_conns node1)
	ipt_after=$(ip netns exec node1 iptables-save -c)
	sets_after=$(ip netns exec node1 ipset list)
	ask node1 "curl -s localhost:10249/metrics | grep -E '^ipvsproxy_(sync_full_total|sync_partial_total|kernel_write_failures_total)'"
	kc delete-service restart9 >/dev/null

	verdict 9 "restart under load: no request failed, IPVS, iptables and ipsets not rewritten" \
		restart_ok "$synced" "$codes" "$ipvs_before" "$ipvs_after" "$stats_before" "$stats_after" \
		"$ipt_before" "$ipt_after" "$sets_before" "$sets_after" "$monitored"
}

# ipvs_table NODE: `ipvsadm -Ln` without the active/inactive connection counts, which move.
ipvs_table() {
	ip netns exec "$1" ipvsadm -Ln | awk '$1 == "->" { print $1, $2, $3, $4; next } { print }'
}

# vs_conns NODE: "PROTO VIP:PORT CONNS" per virtual server.
vs_conns() {
	ip netns exec "$1" ipvsadm -Ln --stats --exact | awk '/^(TCP|UDP)/ { print $1, $2, $3 }' | sort
}

# rule_counters IPTABLES_SAVE_C: "TABLE RULE PACKETS" for every rule, so counters can be compared.
rule_counters() {
	awk '/^\*/ { t = substr($0, 2) } /^\[/ { c = $1; sub(/^\[/, "", c); split(c, pb, ":"); $1 = ""; print t, $0, "=", pb[1] }' <<<"$1"
}

restart_ok() {
	local synced=$1 codes=$2 ipvs_b=$3 ipvs_a=$4 st_b=$5 st_a=$6 ipt_b=$7 ipt_a=$8 sets_b=$9 sets_a=${10} monitored=${11}
	[[ -n $synced ]] || { echo "the restarted daemon did not finish a sync"; return 1; }
	if grep -vq '^ *[0-9]* 200$' <<<"$codes"; then echo "requests failed: $(oneline "$codes")"; return 1; fi
	local total
	total=$(awk '{ s += $1 } END { print s + 0 }' <<<"$codes")
	((total >= 5)) || { echo "only $total requests ran during the restart"; return 1; }
	[[ $ipvs_b == "$ipvs_a" ]] || { echo "ipvsadm -Ln changed:"; diff <(echo "$ipvs_b") <(echo "$ipvs_a"); return 1; }
	local proto vs n before
	while read -r proto vs n; do
		before=$(awk -v p="$proto" -v v="$vs" '$1 == p && $2 == v { print $3 }' <<<"$st_b")
		((n >= ${before:-0})) || { echo "$proto $vs connection counter went from $before to $n: recreated"; return 1; }
	done <<<"$st_a"
	local rb ra
	rb=$(rule_counters "$ipt_b")
	ra=$(rule_counters "$ipt_a")
	[[ $(sed 's/ = [0-9]*$//' <<<"$rb") == "$(sed 's/ = [0-9]*$//' <<<"$ra")" ]] ||
		{ echo "iptables rules changed:"; diff <(sed 's/ = [0-9]*$//' <<<"$rb") <(sed 's/ = [0-9]*$//' <<<"$ra"); return 1; }
	local reset
	reset=$(paste -d'|' <(echo "$rb") <(echo "$ra") | awk -F'|' '{ nb = $1; sub(/.* = /, "", nb); na = $2; sub(/.* = /, "", na); if (na + 0 < nb + 0) print $2 " (was " nb ")" }')
	[[ -z $reset ]] || { echo "iptables counters reset (rules rewritten): $reset"; return 1; }
	[[ $sets_b == "$sets_a" ]] || { echo "ipsets changed:"; diff <(echo "$sets_b") <(echo "$sets_a"); return 1; }
	[[ -z $monitored ]] || { echo "the kernel reported writes during the restart: $monitored"; return 1; }
}
