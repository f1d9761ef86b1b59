# 12-node-address.sh — issue 14, item 2: a Service address the node already has (k3s ServiceLB,
# kube-vip and bare metal give a node's own address as external or LB IP). node2 gets a second
# address on eth0, 203.0.113.152, as kube-vip would, and the client routes it to node2. A Service
# with that external IP answers on it, yet the address is never bound on node2's kube-ipvs0 nor
# put in KUBE-IPVS-IPS, so node2's other ports on it (here the proxier's /healthz on 10256, as ssh
# or the kubelet would be) still answer instead of being rejected by KUBE-IPVS-FILTER
# (kubernetes#115019, k3s#7183). (Not node2's primary address: node1 would bind that one on its
# kube-ipvs0 and answer the client's ARP for it.)

readonly corner_node2_vip=203.0.113.152

# corner_full_syncs NODE: the node's count of full syncs (addresses are read on a full sync).
corner_full_syncs() { metric "$1" ipvsproxy_sync_full_total; }

scenario_12() {
	heading "An external IP that node2 already holds: served, and node2's own ports on it still answer"
	corner_failures=()
	local full
	full=$(corner_full_syncs node2)
	ip -n node2 addr add "$corner_node2_vip/32" dev eth0
	ip -n client route replace "$corner_node2_vip/32" via "$node2_addr"
	show node2 "ip addr add $corner_node2_vip/32 dev eth0  # as kube-vip would" ""
	# The daemon learns the node's addresses on a full sync (at most --ipvs-sync-period). Wait for
	# two: the first to end may have read the addresses before the one above was added.
	wait_until 30 bash -c "(( \$(ip netns exec node2 curl -s --max-time 5 http://127.0.0.1:10249/metrics | awk '\$1 == \"ipvsproxy_sync_full_total\" { print \$2 }') > ${full:-0} + 1 ))"
	corner_service corner-nodeaddr "
apiVersion: v1
kind: Service
metadata: {name: corner-nodeaddr}
spec:
  type: ClusterIP
  externalIPs: [$corner_node2_vip]
  ports: [{port: 8012, targetPort: 8080, protocol: TCP}]
" || { verdict 12 "node address as external IP" false; return; }
	wait_real_servers node2 tcp "$corner_node2_vip:8012" "$(pod_ip web):8080"

	corner_curl client "http://$corner_node2_vip:8012/"
	corner_expect "hostname=web"
	ask client "curl -sS --max-time 3 -o /dev/null -w '%{http_code}' http://$corner_node2_vip:10256/healthz"
	[[ $status == 0 && $answer == 200 ]] || corner_failures+=("${asked[-1]}: want 200 from node2's own /healthz")
	ask node2 "ip -o addr show dev kube-ipvs0 | grep -c ' $corner_node2_vip/'; ipset test KUBE-IPVS-IPS $corner_node2_vip 2>&1 | tail -n1"
	[[ $answer == 0* && $answer == *"is NOT in set"* ]] || corner_failures+=("${asked[-1]}: want $corner_node2_vip neither on kube-ipvs0 nor in KUBE-IPVS-IPS")

	kc delete-service corner-nodeaddr >/dev/null
	wait_until 30 bash -c "! ip netns exec node2 ipvsadm -Ln -t $corner_node2_vip:8012 >/dev/null 2>&1"
	ask client "curl -sS --max-time 3 -o /dev/null -w '%{http_code}' http://$corner_node2_vip:10256/healthz"
	[[ $status == 0 && $answer == 200 ]] || corner_failures+=("${asked[-1]}: after the Service is gone, want 200")
	ip -n client route del "$corner_node2_vip/32" 2>/dev/null
	ip -n node2 addr del "$corner_node2_vip/32" dev eth0 2>/dev/null
	verdict 12 "external IP $corner_node2_vip held by node2's eth0: the Service answers, node2's :10256 on it answers 200, the address is not on kube-ipvs0 nor in KUBE-IPVS-IPS" \
		no_failures "${corner_failures[@]}"
}
