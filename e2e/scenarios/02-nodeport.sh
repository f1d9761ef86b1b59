# 02-nodeport.sh — seed: "Source IP for Services with Type=NodePort". With the default
# externalTrafficPolicy Cluster every node answers and the pod sees a node's address (SNAT); with
# Local only the node with the endpoint answers, and the pod sees the client's real address.

readonly node_port=30080

scenario_2() {
	heading "Type=NodePort, externalTrafficPolicy Cluster: every node answers, source NATed"
	local info
	info=$(kc apply-service - <<YAML

apiVersion: v1
kind: Service
metadata: {name: nodeport, labels: {app: source-ip-app}}
spec:
  type: NodePort
  ports: [{port: 80, targetPort: 8080, nodePort: $node_port, protocol: TCP}]
YAML
) || { verdict 2 "NodePort Cluster" false; return; }
	show - "e2ectl apply-service nodeport.yaml  # type NodePort, nodePort $node_port" "$(grep -E '^(TYPE|CLUSTER_IP|NODE_PORT_80|EXTERNAL_TRAFFIC_POLICY)=' <<<"$info")"
	show - "e2ectl set-endpoints nodeport $(pod_ip web)@node1" ""
	kc set-endpoints nodeport "$(pod_ip web)@node1" || { verdict 2 "NodePort Cluster" false; return; }
	wait_real_servers node1 tcp "$node1_addr:$node_port" "$(pod_ip web):8080"
	wait_real_servers node2 tcp "$node2_addr:$node_port" "$(pod_ip web):8080"
	local n answers=()
	for n in $node1_addr $node2_addr; do
		ask client "curl -s --max-time 5 $n:$node_port | grep -i client_address"
		answers+=("$answer")
	done
	verdict 2 "NodePort Cluster: both nodes answer, client_address is a node's address" \
		all_node_addresses "${answers[@]}"
}

# all_node_addresses ANSWER...: every answer is client_address=<a node's address>.
all_node_addresses() {
	local a
	for a in "$@"; do
		[[ $a == "client_address=$node1_addr" || $a == "client_address=$node2_addr" ]] ||
			{ echo "got '$a', want client_address=$node1_addr or $node2_addr"; return 1; }
	done
}

scenario_3() {
	heading "Type=NodePort, externalTrafficPolicy Local: only the endpoint's node answers, with the client's address"
	local info
	info=$(kc patch-etp nodeport Local) || { verdict 3 "NodePort Local" false; return; }
	show - "e2ectl patch-etp nodeport Local  # kubectl patch svc nodeport -p '{\"spec\":{\"externalTrafficPolicy\":\"Local\"}}'" \
		"$(grep -E '^EXTERNAL_TRAFFIC_POLICY=' <<<"$info")"
	# node2 has no local endpoint: its virtual server keeps the cluster endpoint for in-cluster
	# sources only; outsiders are dropped (KUBE-LOCAL-NO-ENDPOINTS, issue 14).
	wait_until 30 bash -c "ip netns exec node2 ipset test KUBE-LOCAL-NO-ENDPOINTS $node2_addr,tcp:$node_port 2>/dev/null"
	ask client "for node in $node1_addr $node2_addr; do curl --connect-timeout 1 --max-time 3 -s \$node:$node_port | grep -i client_address; done"
	local all=$answer
	ask client "curl --connect-timeout 1 --max-time 3 -s $node2_addr:$node_port | grep -i client_address"
	local other=$answer
	verdict 3 "NodePort Local: only node1 answers, client_address=$client_addr; node2 gives nothing" \
		bash -c "[[ '$all' == client_address=$client_addr && -z '$other' ]] ||
			{ echo 'want exactly one line client_address=$client_addr (from node1) and nothing from node2'; exit 1; }"
}
