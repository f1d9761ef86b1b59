# 04-loadbalancer.sh — seed: "Source IP for Services with Type=LoadBalancer". The load balancer
# (namespace lb, IPVS direct routing, see e2e/topology) forwards 203.0.113.140 to the nodes and
# keeps the client's address. Under Cluster the node source-NATs; under Local the API server
# allocates healthCheckNodePort, the node without an endpoint fails its health check, the load
# balancer drops it, and the pod sees the client's real address.

readonly lb_node_port=30090

scenario_4() {
	heading "Type=LoadBalancer, externalTrafficPolicy Cluster: answers, source NATed"
	local info
	info=$(kc apply-service - <<YAML

apiVersion: v1
kind: Service
metadata: {name: loadbalancer, labels: {app: source-ip-app}}
spec:
  type: LoadBalancer
  ports: [{port: 80, targetPort: 8080, nodePort: $lb_node_port, protocol: TCP}]
YAML
) || { verdict 4 "LoadBalancer Cluster" false; return; }
	show - "e2ectl apply-service loadbalancer.yaml  # type LoadBalancer, port 80" "$(grep -E '^(TYPE|CLUSTER_IP|EXTERNAL_TRAFFIC_POLICY)=' <<<"$info")"
	show - "e2ectl set-endpoints loadbalancer $(pod_ip web)@node1" ""
	kc set-endpoints loadbalancer "$(pod_ip web)@node1" || { verdict 4 "LoadBalancer Cluster" false; return; }
	# No cloud controller runs: write the ingress IP into the status as one would.
	set_lb_ingress loadbalancer "$vip" || { verdict 4 "LoadBalancer Cluster: set status.loadBalancer.ingress" false; return; }
	show - "curl -X PATCH .../services/loadbalancer/status -d '{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"$vip\"}]}}}'  # as a cloud controller would" "EXTERNAL-IP $vip"
	wait_real_servers node1 tcp "$vip:80" "$(pod_ip web):8080"
	wait_real_servers node2 tcp "$vip:80" "$(pod_ip web):8080"
	"$topo" lb-add tcp 80
	local i answers=()
	# Round robin in the load balancer: four requests reach each node twice.
	for i in 1 2 3 4; do
		ask client "curl -s --max-time 5 $vip | grep -i client_address"
		answers+=("$answer")
	done
	verdict 4 "LoadBalancer Cluster: $vip answers, client_address is a node's address" \
		all_node_addresses "${answers[@]}"
}

scenario_5() {
	heading "Type=LoadBalancer, externalTrafficPolicy Local: health checks steer the load balancer"
	local info
	info=$(kc patch-etp loadbalancer Local) || { verdict 5 "LoadBalancer Local" false; return; }
	hc_port=$(field HEALTH_CHECK_NODE_PORT "$info")
	show - "e2ectl patch-etp loadbalancer Local | grep HEALTH_CHECK_NODE_PORT" "HEALTH_CHECK_NODE_PORT=$hc_port"
	# node2 has no local endpoint once the proxier saw the change: outsiders are dropped there
	# (KUBE-LOCAL-NO-ENDPOINTS, issue 14) and its health check says 503.
	wait_until 30 bash -c "ip netns exec node2 ipset test KUBE-LOCAL-NO-ENDPOINTS $vip,tcp:80 2>/dev/null"
	wait_until 30 bash -c "[[ \$(ip netns exec node2 curl -s -o /dev/null -w '%{http_code}' --max-time 2 localhost:$hc_port/healthz) == 503 ]]"
	ask node1 "curl -s -w ' %{http_code}' localhost:$hc_port/healthz"
	local h1=$answer
	ask node2 "curl -s -w ' %{http_code}' localhost:$hc_port/healthz"
	local h2=$answer
	# The load balancer now weighs each node by its health check (200 -> 1, else 0).
	"$topo" lb-del tcp 80
	"$topo" lb-add tcp 80 "$hc_port"
	wait_until 30 lb_weights_are 1 0
	ask lb "ipvsadm -Ln -t $vip:80"
	local i answers=()
	for i in 1 2 3 4; do
		ask client "curl -s --max-time 5 $vip | grep -i client_address"
		answers+=("$answer")
	done
	verdict 5 "LoadBalancer Local: healthCheckNodePort $hc_port 200/localEndpoints 1 on node1, 503/0 on node2; LB keeps $client_addr" \
		lb_local_ok "$h1" "$h2" "${answers[@]}"
}

# lb_weights_are W1 W2: the load balancer's weights for node1 and node2.
lb_weights_are() {
	local out
	out=$(ip netns exec lb ipvsadm -Ln -t "$vip:80") || return 1
	[[ $(awk -v a="$node1_addr:80" '$2 == a { print $4 }' <<<"$out") == "$1" &&
		$(awk -v a="$node2_addr:80" '$2 == a { print $4 }' <<<"$out") == "$2" ]]
}

lb_local_ok() {
	# The body is kube-proxy's indented JSON: compare without white space.
	local h1=${1//[[:space:]]/} h2=${2//[[:space:]]/} a
	shift 2
	[[ $h1 == *'"localEndpoints":1'* && $h1 == *'}200' ]] || { echo "node1 health check: got '$h1', want localEndpoints 1 and 200"; return 1; }
	[[ $h2 == *'"localEndpoints":0'* && $h2 == *'}503' ]] || { echo "node2 health check: got '$h2', want localEndpoints 0 and 503"; return 1; }
	for a in "$@"; do
		[[ $a == "client_address=$client_addr" ]] || { echo "through the LB got '$a', want client_address=$client_addr"; return 1; }
	done
}
