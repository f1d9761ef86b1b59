# 15-node-source-ranges.sh — issue 14, item 5: loadBalancerSourceRanges hold for traffic the node
# sends itself (kube-proxy's KUBE-IPVS-OUT-FILTER, kubernetes#119656). The ranges admit only the
# outside client: the client is served, node1's own curl to the LB IP is refused locally, a pod
# is dropped. With node1's range added, node1 is served.

scenario_15() {
	heading "Source ranges apply to the node's own traffic to the LB IP"
	corner_failures=()
	local yaml="
apiVersion: v1
kind: Service
metadata: {name: corner-ranges}
spec:
  type: LoadBalancer
  ports: [{port: 8015, targetPort: 8080, nodePort: 30115, protocol: TCP}]
  loadBalancerSourceRanges: [RANGES]"
	corner_service corner-ranges "${yaml/RANGES/$client_addr/32}" || { verdict 15 "source ranges from the node" false; return; }
	set_lb_ingress corner-ranges "$vip" || { verdict 15 "source ranges from the node: set status" false; return; }
	wait_real_servers node1 tcp "$vip:8015" "$(pod_ip web):8080"
	wait_real_servers node2 tcp "$vip:8015" "$(pod_ip web):8080"
	"$topo" lb-add tcp 8015
	corner_curl client "http://$vip:8015/"
	corner_expect "hostname=web"
	corner_curl node1 "http://$vip:8015/"
	((status != 0)) || corner_failures+=("${asked[-1]}: node1 is outside the ranges, want no answer")
	corner_curl c1 "http://$vip:8015/"
	corner_expect_silence

	kc apply-service - <<<"${yaml/RANGES/$client_addr/32, 198.51.100.0/24}" >/dev/null
	show - "e2ectl apply-service corner-ranges.yaml  # loadBalancerSourceRanges: [$client_addr/32, 198.51.100.0/24]" ""
	wait_until 30 bash -c "ip netns exec node1 ipset list KUBE-LOAD-BALANCER-SRC-CIDR | grep -q '$vip,tcp:8015,198.51.100.0/24'"
	corner_curl node1 "http://$vip:8015/"
	corner_expect "hostname=web"

	"$topo" lb-del tcp 8015
	kc delete-service corner-ranges >/dev/null
	verdict 15 "loadBalancerSourceRanges [$client_addr/32]: client served, node1 refused, pod c1 dropped; with 198.51.100.0/24 added node1 is served" \
		no_failures "${corner_failures[@]}"
}
