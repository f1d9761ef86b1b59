# 48-ownership-record.sh — losing the ownership record does not cut a cluster IP. A pod on node1
# sends requests without pause to Service record48's cluster IP (endpoint web; routed by the Service CIDR
# route, not bound) while (a) `ipset flush KUBE-IPVS-OWNED` runs on node1 under the running
# daemon, then (b) node1's daemon restarts with --ipset-max-elements 131072, which replaces every
# owned set, the record's included. Before the fix the next full read found no record, took the
# cluster IP's virtual server for someone else's, removed its set members, and the pod's requests
# hit KUBE-SERVICE-CIDRS' REJECT. After: no request fails, the record holds the cluster IP again,
# and the record set has the new maxelem.

scenario_48() {
	heading "The ownership record flushed or replaced: cluster IP traffic goes on"
	local stop=/run/e2e-record.stop log=$E2E_LOGS/record-requests.log failures=() full info ip
	rm -f "$stop" "$log"
	info=$(kc apply-service - <<YAML
apiVersion: v1
kind: Service
metadata: {name: record48}
spec:
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
YAML
	) || { verdict 48 "ownership record" false; return; }
	ip=$(field CLUSTER_IP "$info")
	kc set-endpoints record48 "$(pod_ip web)@node1" >/dev/null || { verdict 48 "ownership record" false; return; }
	show - "e2ectl apply-service record48.yaml  # cluster IP $ip, endpoint web" ""
	wait_real_servers node1 tcp "$ip:80" "$(pod_ip web):8080"
	ip netns exec c1 bash -c "
		while [[ ! -e $stop ]]; do
			curl -s -o /dev/null -w '%{http_code}\n' --max-time 3 http://$ip/ || echo failed
			sleep 0.1
		done" >"$log" 2>&1 &
	local loop=$!
	sleep 2
	full=$(metric node1 ipvsproxy_sync_full_total)
	ip netns exec node1 ipset flush KUBE-IPVS-OWNED
	show node1 "ipset flush KUBE-IPVS-OWNED  # under the running daemon" ""
	wait_until 60 bash -c "(( \$(ip netns exec node1 curl -s --max-time 5 http://127.0.0.1:10249/metrics | awk '\$1 == \"ipvsproxy_sync_full_total\" { print \$2 }') > ${full:-0} + 1 ))"
	ask node1 "ipset test KUBE-IPVS-OWNED $ip,tcp:80 2>&1 | tail -n1"
	[[ $answer == *"is in set"* ]] || failures+=("after the flush: ${asked[-1]}: '$answer', want the record written again")
	restart_proxier_with node1 --ipset-max-elements 131072 || failures+=("node1 did not sync with --ipset-max-elements 131072")
	show - "ipvsproxy run ... --ipset-max-elements 131072  # node1, replacing every owned set" ""
	sleep 2
	touch "$stop"
	wait "$loop"
	local codes
	codes=$(sort "$log" | uniq -c)
	show c1 "sort record-requests.log | uniq -c  # the requests made meanwhile" "$codes"
	grep -qv '^200$' "$log" && failures+=("requests failed meanwhile: $(grep -v '^200$' "$log" | sort | uniq -c | tr '\n' ' ')")
	(($(grep -c '^200$' "$log") > 20)) || failures+=("too few requests answered: $(wc -l <"$log")")
	ask node1 "ipset list KUBE-IPVS-OWNED | grep -o 'maxelem [0-9]*'; ipset test KUBE-IPVS-OWNED $ip,tcp:80 2>&1 | tail -n1"
	[[ $answer == *"maxelem 131072"* && $answer == *"is in set"* ]] || failures+=("after the restart: ${asked[-1]}: '$answer'")
	restart_proxier_with node1
	kc delete-service record48 >/dev/null
	verdict 48 "ipset flush KUBE-IPVS-OWNED and a restart with a larger --ipset-max-elements: no request to the cluster IP failed, the record is written again" \
		no_failures "${failures[@]}"
}
