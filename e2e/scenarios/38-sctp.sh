# 38-sctp.sh — issue 25 item 2: SCTP Services carry real SCTP associations. The echo server is Go,
# whose standard library has no SCTP, so socat speaks it: in pod web a listener that answers each
# association with `hostname=web` and `client_address=<the peer it accepted>` and closes. One
# NodePort Service (Cluster policy) gives both paths: its cluster IP from c1 (web's node) and c2
# (the other node) keeps the pod's address, as for TCP (scenario 1); its node port from the
# outside client is source-NATed to a node address on both nodes. As kube-proxy does, the SCTP
# node port's masquerade goes through the hash:ip,port set KUBE-NODE-PORT-SCTP-HASH (TCP and UDP
# use bitmap:port sets), so node2's entry is checked too. The VM loads the sctp module here
# (`modprobe` finds it in the kernel's module tree, e2e/vm/initramfs-init.sh).
#
# The Service is dual-stack (RequireDualStack, web's IPv4 and IPv6 address): a second listener in
# web (SCTP6-LISTEN, ipv6only) answers over IPv6, and the same checks run on the IPv6 cluster IP
# from c1 and c2 (their IPv6 addresses seen) and on the node port at both nodes' IPv6 addresses
# from the client (SNATed to the node's IPv6 address; node2's entry in
# KUBE-6-NODE-PORT-SCTP-HASH): verdict 38v6. socat names an IPv6 peer in full, in brackets
# ([2001:0db8:...]); the checks expand the address they expect the same way.

readonly sctp_port=9132 sctp_node_port=30132

# sctp_ask WHERE ADDR PORT: one SCTP association from WHERE (over IPv6 when ADDR is one); $answer
# is what the server said, on one line ("hostname=web client_address=..."), $status socat's exit
# status.
sctp_ask() {
	local connect="SCTP-CONNECT:$2"
	[[ $2 == *:* ]] && connect="SCTP6-CONNECT:[$2]"
	ask "$1" "socat -u -T 5 $connect:$3,connect-timeout=3 STDOUT | tr '\n' ' ' | sed 's/ \$//'; exit \${PIPESTATUS[0]}"
}

# ip6_full ADDR: the IPv6 address in full (eight groups of four hex digits), as socat's
# SOCAT_PEERADDR names an IPv6 peer.
ip6_full() {
	local a=$1 head tail n i
	local -a h=() t=() out=()
	if [[ $a == *::* ]]; then head=${a%%::*} tail=${a#*::}; else head=$a tail=; fi
	[[ -z $head ]] || IFS=: read -ra h <<<"$head"
	[[ -z $tail ]] || IFS=: read -ra t <<<"$tail"
	n=$((8 - ${#h[@]} - ${#t[@]}))
	out=("${h[@]}")
	for ((i = 0; i < n; i++)); do out+=(0); done
	out+=("${t[@]}")
	printf '%04x:' "${out[@]/#/0x}" | sed 's/:$//'
}

# sctp_peer ADDR: how the server names a peer at ADDR.
sctp_peer() { if [[ $1 == *:* ]]; then echo "[$(ip6_full "$1")]"; else echo "$1"; fi; }

scenario_38() {
	heading "SCTP: a ClusterIP keeps the pod's address, a Cluster-policy NodePort source-NATs, on both families"
	local failures=() failures6=() server server6 info cip cip6
	ask - "modprobe sctp && grep -c '^SCTP ' /proc/net/protocols"
	((status == 0)) || { verdict 38 "SCTP: the VM's kernel has no sctp module" false; verdict 38v6 "SCTP over IPv6: no sctp module" false; return; }
	# SOCAT_PEERADDR: the address the accepted association came from, as the pod sees it.
	ip netns exec web socat "SCTP-LISTEN:$sctp_port,reuseaddr,fork" \
		SYSTEM:'echo hostname=web; echo client_address=$SOCAT_PEERADDR' >>"$E2E_LOGS/sctp-server.log" 2>&1 &
	server=$!
	ip netns exec web socat "SCTP6-LISTEN:$sctp_port,ipv6only=1,reuseaddr,fork" \
		SYSTEM:'echo hostname=web; echo client_address=$SOCAT_PEERADDR' >>"$E2E_LOGS/sctp-server.log" 2>&1 &
	server6=$!
	show web "socat SCTP-LISTEN:$sctp_port,reuseaddr,fork SYSTEM:'echo hostname=web; echo client_address=\$SOCAT_PEERADDR' & socat SCTP6-LISTEN:$sctp_port,ipv6only=1,reuseaddr,fork SYSTEM:'...' &" ""
	# Pod to pod first, no Service: SCTP itself works here, on both families.
	wait_until 10 ip netns exec c1 socat -u -T 2 "SCTP-CONNECT:$(pod_ip web):$sctp_port,connect-timeout=1" STDOUT ||
		failures+=("c1 -> web $(pod_ip web):$sctp_port directly never answered")
	wait_until 10 ip netns exec c1 socat -u -T 2 "SCTP6-CONNECT:[$(pod_ip6 web)]:$sctp_port,connect-timeout=1" STDOUT ||
		failures6+=("c1 -> web [$(pod_ip6 web)]:$sctp_port directly never answered")
	info=$(kc apply-service - <<YAML
apiVersion: v1
kind: Service
metadata: {name: sctp}
spec:
  type: NodePort
  ipFamilyPolicy: RequireDualStack
  ports: [{port: $sctp_port, targetPort: $sctp_port, nodePort: $sctp_node_port, protocol: SCTP}]
YAML
) || { kill_tree "$server"; kill_tree "$server6"; verdict 38 "SCTP: apply-service" false; verdict 38v6 "SCTP over IPv6: apply-service" false; return; }
	cip=$(cluster_ip_of 4 "$info") cip6=$(cluster_ip_of 6 "$info")
	show - "e2ectl apply-service sctp.yaml  # NodePort, SCTP $sctp_port, nodePort $sctp_node_port, RequireDualStack" "$(grep -E '^(TYPE|CLUSTER_IPS|NODE_PORT_[0-9]+|EXTERNAL_TRAFFIC_POLICY)=' <<<"$info")"
	kc set-endpoints sctp $(dual_endpoints web@node1) || { kill_tree "$server"; kill_tree "$server6"; verdict 38 "SCTP: set-endpoints" false; verdict 38v6 "SCTP over IPv6: set-endpoints" false; return; }
	show - "e2ectl set-endpoints sctp $(pod_ip web)@node1 $(pod_ip6 web)@node1" ""
	local rs=$(pod_ip web):$sctp_port rs6="[$(pod_ip6 web)]:$sctp_port" node
	for node in node1 node2; do
		wait_real_servers "$node" sctp "$cip:$sctp_port" "$rs" || failures+=("$node has no SCTP virtual server $cip:$sctp_port -> $rs")
		wait_real_servers "$node" sctp "[$cip6]:$sctp_port" "$rs6" || failures6+=("$node has no SCTP virtual server [$cip6]:$sctp_port -> $rs6")
	done
	wait_real_servers node1 sctp "$node1_addr:$sctp_node_port" "$rs" || failures+=("node1 has no SCTP node port virtual server")
	wait_real_servers node2 sctp "$node2_addr:$sctp_node_port" "$rs" || failures+=("node2 has no SCTP node port virtual server")
	wait_real_servers node1 sctp "[$node1_addr6]:$sctp_node_port" "$rs6" || failures6+=("node1 has no SCTP node port virtual server on $node1_addr6")
	wait_real_servers node2 sctp "[$node2_addr6]:$sctp_node_port" "$rs6" || failures6+=("node2 has no SCTP node port virtual server on $node2_addr6")
	ask node2 "ipvsadm -Ln --sctp-service $node2_addr:$sctp_node_port | tail -n +4"
	ask node2 "ipset test KUBE-NODE-PORT-SCTP-HASH $node2_addr,sctp:$sctp_node_port"
	((status == 0)) || failures+=("$node2_addr,sctp:$sctp_node_port is not in node2's KUBE-NODE-PORT-SCTP-HASH")
	ask node2 "ipset test KUBE-6-NODE-PORT-SCTP-HASH $node2_addr6,sctp:$sctp_node_port"
	((status == 0)) || failures6+=("$node2_addr6,sctp:$sctp_node_port is not in node2's KUBE-6-NODE-PORT-SCTP-HASH")

	local c want
	for c in c1 c2; do
		sctp_ask $c "$cip" "$sctp_port"
		want="hostname=web client_address=$(pod_ip $c)"
		[[ $answer == "$want" ]] || failures+=("$c -> $cip:$sctp_port: '$answer', want $want")
		sctp_ask $c "$cip6" "$sctp_port"
		want="hostname=web client_address=$(sctp_peer "$(pod_ip6 $c)")"
		[[ $answer == "$want" ]] || failures6+=("$c -> [$cip6]:$sctp_port: '$answer', want $want")
	done
	# Cluster policy: each node masquerades to its own address (web's reply must come back
	# through node2 for node2's association).
	local addr
	for addr in $node1_addr $node2_addr $node1_addr6 $node2_addr6; do
		sctp_ask client "$addr" "$sctp_node_port"
		want="hostname=web client_address=$(sctp_peer "$addr")"
		[[ $answer == "$want" ]] && continue
		if [[ $addr == *:* ]]; then
			failures6+=("client -> [$addr]:$sctp_node_port: '$answer', want $want")
		else
			failures+=("client -> $addr:$sctp_node_port: '$answer', want $want")
		fi
	done

	kill_tree "$server"
	kill_tree "$server6"
	kc delete-service sctp >/dev/null
	for node in node1 node2; do
		wait_until 60 vs_gone "$node" "$cip" || failures+=("$node still has $cip 60 s after its Service was deleted")
		wait_until 60 vs_gone "$node" "[$cip6]" || failures6+=("$node still has [$cip6] 60 s after its Service was deleted")
	done
	verdict 38 "SCTP: cluster IP from c1 and c2 keeps the pod's address; node port from the client on both nodes is SNATed to that node" \
		no_failures "${failures[@]}"
	verdict 38v6 "SCTP over IPv6: cluster IP [$cip6] from c1 and c2 keeps the pod's IPv6 address; node port on [$node1_addr6] and [$node2_addr6] from the client is SNATed to that node's IPv6 address; node2's entry in KUBE-6-NODE-PORT-SCTP-HASH" \
		no_failures "${failures6[@]}"
}
