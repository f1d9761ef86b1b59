# 47-node-guard.sh — a tenant's external IPs cannot take the node, another Node or the API server.
# Stand-ins listen where the real daemons would: node1's "sshd" on 0.0.0.0:22 and node2's
# "kubelet" on 198.51.100.2:10250 (socat, answering a fixed line). default/kubernetes gets the
# API server's address the guest reaches, 192.0.2.100:6443 (this control plane runs with
# --endpoint-reconciler-type=none, so nothing else writes it). Service guard-grab, endpoint s3,
# names as external IPs node1's address (ports 22 and 80), node2's address (10250) and the API
# server's (6443). Without the guard, node1's sshd answered s3, node1 bound node2's and the API
# server's addresses on kube-ipvs0 and lost both. With it: node1's and c1's connections reach the
# stand-ins and the API, port 80 of node1's address (nothing listens there) is served by s3 as a
# bare-metal user wants, and each refusal is an ExternalIPRefused Event.

scenario_47() {
	heading "External IPs cannot take the node's own ports, another Node or the API server"
	local failures=() api=${E2E_HOST_ADDR:-192.0.2.100}
	ip netns exec node1 socat TCP-LISTEN:22,fork,reuseaddr SYSTEM:'echo sshd-node1' >/dev/null 2>&1 &
	local sshd=$!
	ip netns exec node2 socat TCP-LISTEN:10250,bind="$node2_addr",fork,reuseaddr SYSTEM:'echo kubelet-node2' >/dev/null 2>&1 &
	local kubelet=$!
	show node1 "socat TCP-LISTEN:22 ...  # node1's sshd stand-in; node2's kubelet stand-in on $node2_addr:10250" ""
	kc set-endpoints kubernetes "$api" >/dev/null || failures+=("set default/kubernetes's endpoint $api")
	show - "e2ectl set-endpoints kubernetes $api  # the API server, as its endpoint reconciler would" ""
	# A full sync reads the listening sockets: wait for two, the first may have read before socat.
	local full
	full=$(metric node1 ipvsproxy_sync_full_total)
	wait_until 30 bash -c "(( \$(ip netns exec node1 curl -s --max-time 5 http://127.0.0.1:10249/metrics | awk '\$1 == \"ipvsproxy_sync_full_total\" { print \$2 }') > ${full:-0} + 1 ))"
	kc apply-service - >/dev/null <<YAML || failures+=("apply Service guard-grab")
apiVersion: v1
kind: Service
metadata: {name: guard-grab}
spec:
  externalIPs: [$node1_addr, $node2_addr, $api]
  ports:
  - {name: ssh, port: 22, targetPort: 8080, protocol: TCP}
  - {name: http, port: 80, targetPort: 8080, protocol: TCP}
  - {name: kubelet, port: 10250, targetPort: 8080, protocol: TCP}
  - {name: api, port: 6443, targetPort: 8080, protocol: TCP}
YAML
	kc set-endpoints guard-grab "$(pod_ip s3)@node1" >/dev/null || failures+=("set guard-grab's endpoint")
	show - "e2ectl apply-service guard-grab.yaml  # externalIPs $node1_addr $node2_addr $api; ports 22 80 10250 6443; endpoint s3" ""
	wait_real_servers node1 tcp "$node1_addr:80" "$(pod_ip s3):8080"

	ask node1 "socat -T2 - TCP:$node1_addr:22,connect-timeout=2 </dev/null"
	[[ $answer == sshd-node1 ]] || failures+=("${asked[-1]}: '$answer', want node1's own sshd")
	ask c1 "socat -T2 - TCP:$node1_addr:22,connect-timeout=2 </dev/null"
	[[ $answer == sshd-node1 ]] || failures+=("${asked[-1]}: '$answer', want node1's own sshd")
	ask node1 "socat -T2 - TCP:$node2_addr:10250,connect-timeout=2 </dev/null"
	[[ $answer == kubelet-node2 ]] || failures+=("${asked[-1]}: '$answer', want node2's kubelet")
	ask node1 "curl -sS --max-time 5 --cacert $E2E_PKI/ca.crt --cert $E2E_PKI/admin.crt --key $E2E_PKI/admin.key https://$api:6443/readyz"
	[[ $answer == ok ]] || failures+=("${asked[-1]}: '$answer', want the API server's ok")
	ask c1 "curl -sS --max-time 3 http://$node1_addr:80/ | grep ^hostname="
	[[ $answer == hostname=s3 ]] || failures+=("${asked[-1]}: '$answer', want s3 on port 80 of node1's address")
	ask node1 "ip -o addr show dev kube-ipvs0 | grep -cE ' ($node2_addr|$api)/'"
	[[ $answer == 0 ]] || failures+=("${asked[-1]}: node2's or the API server's address bound on node1's kube-ipvs0")
	wait_until 20 bash -c "grab_events | grep -q 'is an address of Node node2'"
	ask - "grab_events"
	local want
	for want in "external IP $node1_addr is an address of this node, and a process of the node listens on TCP 0.0.0.0:22" \
		"external IP $node2_addr is an address of Node node2" "external IP $api is an address of the API server"; do
		[[ $answer == *"$want"* ]] || failures+=("no Event saying '$want'")
	done

	kc delete-service guard-grab >/dev/null
	kc set-endpoints kubernetes >/dev/null
	kill "$sshd" "$kubelet" 2>/dev/null
	wait "$sshd" "$kubelet" 2>/dev/null
	verdict 47 "external IPs on node1's :22 (a listener), node2's address and the API server's are refused with Events; node1 and c1 still reach node1's sshd, node2's kubelet and the API; node1's :80 is served" \
		no_failures "${failures[@]}"
}

# grab_events: the ExternalIPRefused Events on Service guard-grab, one message a line.
grab_events() {
	curl -sS --fail --max-time 20 --cacert "$E2E_PKI/ca.crt" --cert "$E2E_PKI/admin.crt" --key "$E2E_PKI/admin.key" \
		"https://$E2E_HOST_ADDR:6443/api/v1/namespaces/default/events?fieldSelector=involvedObject.name=guard-grab,reason=ExternalIPRefused" |
		grep -o '"message": *"[^"]*"' | sort -u
}
export -f grab_events
