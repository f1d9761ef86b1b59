# 12-node-address.sh — issue 14, item 2: a Service address the node already has (k3s ServiceLB,
# kube-vip and bare metal write a node's address as external or LB IP). The Service answers on
# node2's own address, which is never bound on kube-ipvs0 nor put in KUBE-IPVS-IPS, so the node's
# other ports (here the proxier's /healthz on 10256, as ssh or the kubelet would be) still answer
# instead of being rejected by KUBE-IPVS-FILTER (kubernetes#115019, k3s#7183).

scenario_12() {
	heading "An external IP equal to node2's address: served, and node2's own ports still answer"
	corner_failures=()
	corner_service corner-nodeaddr "
apiVersion: v1
kind: Service
metadata: {name: corner-nodeaddr}
spec:
  type: ClusterIP
  externalIPs: [$node2_addr]
  ports: [{port: 8012, targetPort: 8080, protocol: TCP}]
" || { verdict 12 "node address as external IP" false; return; }
	wait_real_servers node2 tcp "$node2_addr:8012" "$(pod_ip web):8080"

	corner_curl client "http://$node2_addr:8012/"
	corner_expect "hostname=web"
	ask client "curl -sS --max-time 3 -o /dev/null -w '%{http_code}' http://$node2_addr:10256/healthz"
	[[ $status == 0 && $answer == 200 ]] || corner_failures+=("${asked[-1]}: want 200 from node2's own /healthz")
	ask node2 "ip -o addr show dev kube-ipvs0 | grep -c ' $node2_addr/' ; ipset test KUBE-IPVS-IPS $node2_addr 2>&1 | tail -n1"
	[[ $answer == 0* && $answer == *"is NOT in set"* ]] || corner_failures+=("${asked[-1]}: want $node2_addr neither on kube-ipvs0 nor in KUBE-IPVS-IPS")

	kc delete-service corner-nodeaddr >/dev/null
	wait_until 30 bash -c "! ip netns exec node2 ipvsadm -Ln -t $node2_addr:8012 >/dev/null 2>&1"
	ask client "curl -sS --max-time 3 -o /dev/null -w '%{http_code}' http://$node2_addr:10256/healthz"
	[[ $status == 0 && $answer == 200 ]] || corner_failures+=("${asked[-1]}: after the Service is gone, want 200")
	verdict 12 "external IP $node2_addr (node2's own): the Service answers, node2's :10256 answers 200, the address is not on kube-ipvs0 nor in KUBE-IPVS-IPS" \
		no_failures "${corner_failures[@]}"
}
