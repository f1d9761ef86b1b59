# 38-sctp.sh — issue 25 item 2: SCTP Services carry real SCTP associations. The echo server is Go,
# whose standard library has no SCTP, so socat speaks it: in pod web a listener that answers each
# association with `hostname=web` and `client_address=<the peer it accepted>` and closes. One
# NodePort Service (Cluster policy) gives both paths: its cluster IP from c1 (web's node) and c2
# (the other node) keeps the pod's address, as for TCP (scenario 1); its node port from the
# outside client is source-NATed to a node address on both nodes. As kube-proxy does, the SCTP
# node port's masquerade goes through the hash:ip,port set KUBE-NODE-PORT-SCTP-HASH (TCP and UDP
# use bitmap:port sets), so node2's entry is checked too. The VM loads the sctp module here
# (`modprobe` finds it in the kernel's module tree, e2e/vm/initramfs-init.sh).

readonly sctp_port=9132 sctp_node_port=30132

# sctp_ask WHERE ADDR PORT: one SCTP association from WHERE; $answer is what the server said, on
# one line ("hostname=web client_address=..."), $status socat's exit status.
sctp_ask() {
	ask "$1" "socat -u -T 5 SCTP-CONNECT:$2:$3,connect-timeout=3 STDOUT | tr '\n' ' ' | sed 's/ \$//'; exit \${PIPESTATUS[0]}"
}

scenario_38() {
	heading "SCTP: a ClusterIP keeps the pod's address, a Cluster-policy NodePort source-NATs"
	local failures=() server info cip
	ask - "modprobe sctp && grep -c '^SCTP ' /proc/net/protocols"
	((status == 0)) || { verdict 38 "SCTP: the VM's kernel has no sctp module" false; return; }
	# SOCAT_PEERADDR: the address the accepted association came from, as the pod sees it.
	ip netns exec web socat "SCTP-LISTEN:$sctp_port,reuseaddr,fork" \
		SYSTEM:'echo hostname=web; echo client_address=$SOCAT_PEERADDR' >>"$E2E_LOGS/sctp-server.log" 2>&1 &
	server=$!
	show web "socat SCTP-LISTEN:$sctp_port,reuseaddr,fork SYSTEM:'echo hostname=web; echo client_address=\$SOCAT_PEERADDR' &" ""
	# Pod to pod first, no Service: SCTP itself works here.
	wait_until 10 ip netns exec c1 socat -u -T 2 "SCTP-CONNECT:$(pod_ip web):$sctp_port,connect-timeout=1" STDOUT ||
		failures+=("c1 -> web $(pod_ip web):$sctp_port directly never answered")
	info=$(kc apply-service - <<YAML
apiVersion: v1
kind: Service
metadata: {name: sctp}
spec:
  type: NodePort
  ports: [{port: $sctp_port, targetPort: $sctp_port, nodePort: $sctp_node_port, protocol: SCTP}]
YAML
) || { kill_tree "$server"; verdict 38 "SCTP: apply-service" false; return; }
	cip=$(field CLUSTER_IP "$info")
	show - "e2ectl apply-service sctp.yaml  # NodePort, SCTP $sctp_port, nodePort $sctp_node_port" "$(grep -E '^(TYPE|CLUSTER_IP|NODE_PORT_[0-9]+|EXTERNAL_TRAFFIC_POLICY)=' <<<"$info")"
	kc set-endpoints sctp "$(pod_ip web)@node1" || { kill_tree "$server"; verdict 38 "SCTP: set-endpoints" false; return; }
	show - "e2ectl set-endpoints sctp $(pod_ip web)@node1" ""
	local rs=$(pod_ip web):$sctp_port node
	for node in node1 node2; do
		wait_real_servers "$node" sctp "$cip:$sctp_port" "$rs" || failures+=("$node has no SCTP virtual server $cip:$sctp_port -> $rs")
	done
	wait_real_servers node1 sctp "$node1_addr:$sctp_node_port" "$rs" || failures+=("node1 has no SCTP node port virtual server")
	wait_real_servers node2 sctp "$node2_addr:$sctp_node_port" "$rs" || failures+=("node2 has no SCTP node port virtual server")
	ask node2 "ipvsadm -Ln --sctp-service $node2_addr:$sctp_node_port | tail -n +4"
	ask node2 "ipset test KUBE-NODE-PORT-SCTP-HASH $node2_addr,sctp:$sctp_node_port"
	((status == 0)) || failures+=("$node2_addr,sctp:$sctp_node_port is not in node2's KUBE-NODE-PORT-SCTP-HASH")

	sctp_ask c1 "$cip" "$sctp_port"
	[[ $answer == "hostname=web client_address=$(pod_ip c1)" ]] ||
		failures+=("c1 -> $cip:$sctp_port: '$answer', want hostname=web client_address=$(pod_ip c1)")
	sctp_ask c2 "$cip" "$sctp_port"
	[[ $answer == "hostname=web client_address=$(pod_ip c2)" ]] ||
		failures+=("c2 -> $cip:$sctp_port: '$answer', want hostname=web client_address=$(pod_ip c2)")
	# Cluster policy: each node masquerades to its own address (web's reply must come back
	# through node2 for node2's association).
	local addr
	for addr in $node1_addr $node2_addr; do
		sctp_ask client "$addr" "$sctp_node_port"
		[[ $answer == "hostname=web client_address=$addr" ]] ||
			failures+=("client -> $addr:$sctp_node_port: '$answer', want hostname=web client_address=$addr")
	done

	kill_tree "$server"
	kc delete-service sctp >/dev/null
	for node in node1 node2; do
		wait_until 60 vs_gone "$node" "$cip" || failures+=("$node still has $cip 60 s after its Service was deleted")
	done
	verdict 38 "SCTP: cluster IP from c1 and c2 keeps the pod's address; node port from the client on both nodes is SNATed to that node" \
		no_failures "${failures[@]}"
}
