# 30-inspect.sh — issue 10: `ipvsproxy inspect` on a node running the seeds' kind of Services.
# 30: the table names each Service and its endpoints, with a non-zero flow count after traffic;
# 31: --check exits 1 after a real server is deleted by hand with ipvsadm, 0 after the next sync;
# 32-34: `inspect trace` verdicts, each confirmed by real traffic: a ClusterIP from a pod, a Local
# NodePort from outside on the node without endpoints, a source-ranged LB from a forbidden client.
# Every Service here is set up by these scenarios (ports 81/30085/30086 clash with nothing else).

readonly inspect_np_local=30085 inspect_lb_np=30086

# inspect_on NODE ARGS...: the daemon's own binary, run in the node as an operator would.
inspect_on() {
	local node=$1
	shift
	ip netns exec "$node" "$ipvsproxy" inspect "$@"
}

scenario_30() {
	heading "inspect: the kernel's virtual servers named by Service, with flows after traffic"
	local info ip
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: inspect-web}
spec:
  type: ClusterIP
  ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]
YAML
) || { verdict 30 "inspect names Services" false; return; }
	ip=$(field CLUSTER_IP "$info")
	inspect_ip=$ip
	kc set-endpoints inspect-web "$(pod_ip web)@node1" "$(pod_ip s2)@node2" || { verdict 30 "inspect names Services" false; return; }
	wait_real_servers node1 tcp "$ip:80" "$(pod_ip web):8080 $(pod_ip s2):8080"
	local i
	for i in 1 2 3 4 5 6; do
		ask c1 "curl -s --max-time 5 -o /dev/null -w '%{http_code}' $ip"
	done
	# IPVS reports connection counts its estimator summed from per-CPU counters, every 2 s: wait
	# for them rather than read a count that lags the requests.
	wait_until 10 inspect_connections_at_least 6
	ask node1 "$ipvsproxy inspect --service default/inspect-web"
	local table=$answer
	printf '%s\n' "$table" >"$E2E_LOGS/inspect-node1-table.txt"
	ask node1 "$ipvsproxy inspect -o json --service default/inspect-web | jq -c '.virtualServers[] | {service, portName, type, flows, connections: .stats.connections, realServers: [.realServers[] | {address, node, condition}]}'"
	local json=$answer
	# The whole node, as a person first types it (kept for README).
	inspect_on node1 >"$E2E_LOGS/inspect-node1-all.txt" 2>&1
	inspect_on node1 -o yaml --service default/inspect-web >"$E2E_LOGS/inspect-node1.yaml" 2>&1
	verdict 30 "inspect on node1 names default/inspect-web:http, both endpoints with their nodes, flows > 0 after 6 requests" \
		inspect_named_ok "$table" "$json"
}

# inspect_connections_at_least N: node1's inspect counts N or more connections to inspect-web's cluster IP.
inspect_connections_at_least() {
	local n
	n=$(inspect_on node1 -o json --service default/inspect-web | jq -r '[.virtualServers[] | select(.type == "ClusterIP") | .stats.connections] | max // 0')
	((n >= $1))
}

inspect_named_ok() {
	local table=$1 json=$2
	[[ $table == *"default/inspect-web:http"*"ClusterIP"*"TCP $inspect_ip:80"* ]] || { echo "table lacks default/inspect-web:http ClusterIP TCP $inspect_ip:80"; return 1; }
	[[ $table == *"$(pod_ip web):8080"*"ready on node1"* && $table == *"$(pod_ip s2):8080"*"ready on node2"* ]] ||
		{ echo "table lacks the endpoints with their nodes"; return 1; }
	[[ $table == *"sync: last full"* ]] || { echo "table lacks the sync status"; return 1; }
	local flows conns
	flows=$(jq -r 'select(.type == "ClusterIP") | .flows' <<<"$json")
	conns=$(jq -r 'select(.type == "ClusterIP") | .connections' <<<"$json")
	[[ -n $flows && $flows -gt 0 && -n $conns && $conns -ge 6 ]] || { echo "flows=$flows connections=$conns, want flows > 0 and connections >= 6"; return 1; }
}

scenario_31() {
	heading "inspect --check: 0 when the kernel agrees, 1 after ipvsadm -d, 0 again after the next sync"
	[[ -n ${inspect_ip:-} ]] || { verdict 31 "inspect --check: scenario 30 sets up the Service" false; return; }
	local ip=$inspect_ip before after_delete repaired t0
	ask node1 "$ipvsproxy inspect --check"
	before=$status
	# The daemon's periodic full sync may repair the real server between the deletion and the
	# check (the VM takes a second or two to start inspect): delete it again, up to three times.
	local try
	for try in 1 2 3; do
		ask node1 "ipvsadm -d -t $ip:80 -r $(pod_ip s2):8080 && $ipvsproxy inspect --check"
		after_delete=$status
		[[ $after_delete == 0 ]] || break
	done
	local diff=$answer
	t0=$(now)
	# The next full sync (every $sync_period here) re-reads the kernel and repairs it.
	wait_until 60 inspect_on node1 --check
	ask node1 "$ipvsproxy inspect --check"
	repaired=$status
	local took
	took=$(since "$t0")
	ask node1 "$ipvsproxy inspect --check --daemon 127.0.0.1:1"
	local unreachable=$status
	verdict 31 "inspect --check: exit $before before, $after_delete after ipvsadm -d (missing real server), $repaired after the next sync (${took}s), $unreachable without the daemon" \
		check_exits_ok "$before" "$after_delete" "$repaired" "$unreachable" "$diff"
}

check_exits_ok() {
	[[ $1 == 0 ]] || { echo "--check before the deletion exited $1, want 0"; return 1; }
	[[ $2 == 1 ]] || { echo "--check after ipvsadm -d exited $2, want 1"; return 1; }
	[[ $5 == *"missing real server $(pod_ip s2):8080 of TCP $inspect_ip:80 (default/inspect-web:http)"* ]] ||
		{ echo "--check did not name the missing real server"; return 1; }
	[[ $3 == 0 ]] || { echo "--check after the repair exited $3, want 0"; return 1; }
	[[ $4 == 2 ]] || { echo "--check without a daemon exited $4, want 2"; return 1; }
}

scenario_32() {
	heading "inspect trace: a ClusterIP from a pod is load-balanced, not masqueraded"
	[[ -n ${inspect_ip:-} ]] || { verdict 32 "inspect trace ClusterIP: scenario 30 sets up the Service" false; return; }
	local ip=$inspect_ip
	ask node1 "$ipvsproxy inspect trace $(pod_ip c1) $ip:80/tcp"
	local trace=$answer
	printf '%s\n' "$trace" >"$E2E_LOGS/inspect-trace-clusterip.txt"
	ask c1 "curl -s --max-time 5 $ip | grep client_address"
	verdict 32 "trace c1 -> $ip:80: load-balanced to both endpoints, not masqueraded; c1 is seen as itself" \
		trace_clusterip_ok "$trace" "$answer"
}

trace_clusterip_ok() {
	[[ $1 == *"verdict: load-balanced"* ]] || { echo "want verdict load-balanced"; return 1; }
	[[ $1 == *"-> $(pod_ip web):8080 on node1 (ready): not masqueraded"* && $1 == *"-> $(pod_ip s2):8080 on node2 (ready): not masqueraded"* ]] ||
		{ echo "want both real servers, not masqueraded"; return 1; }
	[[ $1 == *"kernel: virtual server TCP $inspect_ip:80 is in the kernel with the same real servers"* ]] || { echo "want the kernel check to agree"; return 1; }
	[[ $2 == "client_address=$(pod_ip c1)" ]] || { echo "real traffic: got '$2', want client_address=$(pod_ip c1)"; return 1; }
}

scenario_33() {
	heading "inspect trace: a Local NodePort from outside on the node without endpoints is dropped"
	kc apply-service - >/dev/null <<YAML || { verdict 33 "trace Local NodePort" false; return; }
apiVersion: v1
kind: Service
metadata: {name: inspect-local}
spec:
  type: NodePort
  externalTrafficPolicy: Local
  ports: [{name: http, port: 80, targetPort: 8080, nodePort: $inspect_np_local, protocol: TCP}]
YAML
	kc set-endpoints inspect-local "$(pod_ip web)@node1" || { verdict 33 "trace Local NodePort" false; return; }
	wait_real_servers node1 tcp "$node1_addr:$inspect_np_local" "$(pod_ip web):8080"
	# Without a local endpoint node2 keeps the cluster endpoints for in-cluster sources
	# (kubernetes#97081); its filter drops everyone else.
	wait_real_servers node2 tcp "$node2_addr:$inspect_np_local" "$(pod_ip web):8080"
	ask node2 "$ipvsproxy inspect trace $client_addr $node2_addr:$inspect_np_local"
	local trace2=$answer
	printf '%s\n' "$trace2" >"$E2E_LOGS/inspect-trace-local-nodeport.txt"
	ask node1 "$ipvsproxy inspect trace $client_addr $node1_addr:$inspect_np_local"
	local trace1=$answer
	ask client "curl -s --connect-timeout 2 --max-time 3 -o /dev/null -w '%{http_code}' $node2_addr:$inspect_np_local; echo \" rc=\$?\""
	local via2=$answer
	ask client "curl -s --max-time 5 $node1_addr:$inspect_np_local | grep client_address"
	verdict 33 "trace client -> node2:$inspect_np_local dropped silently (Local, no endpoint on node2); -> node1 load-balanced with the client's address; real traffic agrees" \
		trace_local_ok "$trace2" "$trace1" "$via2" "$answer"
}

trace_local_ok() {
	[[ $1 == *"verdict: dropped: KUBE-IPVS-FILTER drops it: $node2_addr:$inspect_np_local has traffic policy Local and no endpoint on this node"*"dropped silently"* ]] ||
		{ echo "node2: want verdict dropped silently by KUBE-IPVS-FILTER (Local, no endpoint on node2)"; return 1; }
	[[ $2 == *"verdict: load-balanced"* && $2 == *"-> $(pod_ip web):8080 on node1 (ready): not masqueraded (a node port of a Service with externalTrafficPolicy Local"* ]] ||
		{ echo "node1: want load-balanced to web, not masqueraded"; return 1; }
	# curl exit 28 is a timeout: no reply, no RST, no ICMP (7 would be a refusal).
	[[ $3 == "000 rc=28" ]] || { echo "real traffic to node2: got '$3', want no answer at all (000 rc=28)"; return 1; }
	[[ $4 == "client_address=$client_addr" ]] || { echo "real traffic to node1: got '$4', want client_address=$client_addr"; return 1; }
}

scenario_34() {
	heading "inspect trace: a load balancer with source ranges drops a forbidden client"
	kc apply-service - >/dev/null <<YAML || { verdict 34 "trace source-ranged LB" false; return; }
apiVersion: v1
kind: Service
metadata: {name: inspect-ranged}
spec:
  type: LoadBalancer
  loadBalancerSourceRanges: [10.244.2.0/24]
  ports: [{name: http, port: 81, targetPort: 8080, nodePort: $inspect_lb_np, protocol: TCP}]
YAML
	kc set-endpoints inspect-ranged "$(pod_ip web)@node1" || { verdict 34 "trace source-ranged LB" false; return; }
	set_lb_ingress inspect-ranged "$vip" || { verdict 34 "trace source-ranged LB: set status" false; return; }
	wait_real_servers node1 tcp "$vip:81" "$(pod_ip web):8080"
	wait_real_servers node2 tcp "$vip:81" "$(pod_ip web):8080"
	ask node1 "$ipvsproxy inspect trace $(pod_ip c1) $vip:81"
	local forbidden=$answer
	printf '%s\n' "$forbidden" >"$E2E_LOGS/inspect-trace-source-ranges.txt"
	ask node2 "$ipvsproxy inspect trace $(pod_ip c2) $vip:81"
	local allowed=$answer
	ask c1 "curl -s --connect-timeout 2 --max-time 3 -o /dev/null -w '%{http_code}' $vip:81"
	local c1_http=$answer
	ask c2 "curl -s --max-time 5 -o /dev/null -w '%{http_code}' $vip:81"
	verdict 34 "trace c1 (10.244.1.20, outside 10.244.2.0/24) -> $vip:81 dropped by KUBE-IPVS-FILTER; c2 allowed; real traffic agrees" \
		trace_ranges_ok "$forbidden" "$allowed" "$c1_http" "$answer"
}

trace_ranges_ok() {
	[[ $1 == *"verdict: dropped: KUBE-IPVS-FILTER drops it: load balancer $vip:81 has loadBalancerSourceRanges and $(pod_ip c1) is outside them"* && $1 == *"KUBE-LOAD-BALANCER-SRC-CIDR dst,dst,src -j DROP"* ]] ||
		{ echo "c1: want dropped by the source-range rule"; return 1; }
	[[ $1 == *"kernel: virtual server TCP $vip:81 is in the kernel with the same real servers"* ]] || { echo "c1: want the kernel check to agree"; return 1; }
	[[ $2 == *"verdict: load-balanced"* ]] || { echo "c2: want load-balanced"; return 1; }
	[[ $3 == 000 ]] || { echo "real traffic from c1: got HTTP '$3', want none"; return 1; }
	[[ $4 == 200 ]] || { echo "real traffic from c2: got HTTP '$4', want 200"; return 1; }
}
