# 01-clusterip.sh — seed: "Source IP for Services with Type=ClusterIP". Packets sent to a
# ClusterIP from inside the cluster are never source-NATed: the pod sees the client pod's address,
# whether the client runs on the endpoint's node or on the other one.

scenario_1() {
	heading "Type=ClusterIP: the pod sees the client pod's address"
	local info
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: clusterip, labels: {app: source-ip-app}}
spec:
  type: ClusterIP
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
YAML
) || { verdict 1 "ClusterIP" false; return; }
	cluster_ip=$(field CLUSTER_IP "$info")
	show - "e2ectl apply-service clusterip.yaml  # ClusterIP, port 80 -> 8080" "$(grep -E '^(TYPE|CLUSTER_IP)=' <<<"$info")"
	show - "e2ectl set-endpoints clusterip $(pod_ip web)@node1  # pod web on node1" ""
	kc set-endpoints clusterip "$(pod_ip web)@node1" || { verdict 1 "ClusterIP" false; return; }
	wait_real_servers node1 tcp "$cluster_ip:80" "$(pod_ip web):8080"
	wait_real_servers node2 tcp "$cluster_ip:80" "$(pod_ip web):8080"
	note "ClusterIP is $cluster_ip; c1 runs on node1 (like web), c2 on node2."
	ask c1 "curl -s --max-time 5 $cluster_ip | grep client_address"
	local same=$answer
	ask c2 "curl -s --max-time 5 $cluster_ip | grep client_address"
	local other=$answer
	verdict 1 "ClusterIP: client_address is the client pod's IP from the same node and from the other" \
		bash -c "[[ '$same' == client_address=$(pod_ip c1) && '$other' == client_address=$(pod_ip c2) ]] ||
			{ echo 'want client_address=$(pod_ip c1) and client_address=$(pod_ip c2)'; exit 1; }"
}
