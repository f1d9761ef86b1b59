# 11-local-no-endpoints.sh — issue 14, item 1: externalTrafficPolicy Local on a node without
# local endpoints. node2 has no endpoint of the Service (web runs on node1). Pods and processes on
# node2 that call the Service by its external address (a NodePort of node2, an external IP that
# node2 holds) reach the cluster endpoint, as with kube-proxy (kubernetes#97081); a client outside
# the cluster sees a silent drop: no answer, no RST, no ICMP — curl times out (exit 28) instead of
# being refused (exit 7).
#
# The helpers below (corner_*) serve scenarios 16 and 17 too (12-15 are Go ones now, e2e/suite).

readonly corner_ext_ip=203.0.113.151

# corner_service NAME YAML: apply a Service and set its endpoints to web on node1; prints nothing,
# sets $corner_info (service-info lines).
corner_service() {
	local name=$1 yaml=$2
	corner_info=$(kc apply-service - <<<"$yaml") || return 1
	show - "e2ectl apply-service $name.yaml" "$(grep -E '^(TYPE|CLUSTER_IP|EXTERNAL_TRAFFIC_POLICY|HEALTH_CHECK_NODE_PORT)=' <<<"$corner_info")"
	kc set-endpoints "$name" "$(pod_ip web)@node1" || return 1
	show - "e2ectl set-endpoints $name $(pod_ip web)@node1" ""
}

# corner_curl WHERE URL: curl with a short timeout; $answer is the body's hostname= and
# client_address= lines, or curl's message, and $status its exit status (28: timed out, no reply;
# 7: refused or unreachable).
corner_curl() {
	ask "$1" "curl -sS --max-time 3 $2 | grep -E '^(hostname|client_address)=' | tr '\n' ' '; exit \${PIPESTATUS[0]}"
}

# corner_expect TEXT...: collect a failure unless the last corner_curl's answer holds every TEXT
# and curl succeeded.
corner_expect() {
	local want
	if ((status != 0)); then
		corner_failures+=("${asked[-1]}: curl exit $status, want an answer")
		return
	fi
	for want in "$@"; do
		[[ $answer == *"$want"* ]] || corner_failures+=("${asked[-1]}: want $want")
	done
}

# corner_expect_silence: the last corner_curl timed out (no reply, no RST, no ICMP).
corner_expect_silence() {
	((status == 28)) || corner_failures+=("${asked[-1]}: curl exit $status, want 28 (a silent drop)")
}

scenario_11() {
	heading "Local policy, no endpoint on node2: in-cluster sources served, outsiders silently dropped"
	corner_failures=()
	corner_service corner-local "
apiVersion: v1
kind: Service
metadata: {name: corner-local}
spec:
  type: NodePort
  externalTrafficPolicy: Local
  externalIPs: [$corner_ext_ip]
  ports: [{port: 8011, targetPort: 8080, nodePort: 30111, protocol: TCP}]
" || { verdict 11 "Local policy without local endpoints" false; return; }
	wait_real_servers node1 tcp "$corner_ext_ip:8011" "$(pod_ip web):8080"
	# The client reaches the external IP through node2, as a router would send it.
	ip -n client route replace "$corner_ext_ip/32" via "$node2_addr"
	wait_until 30 bash -c "ip netns exec node2 ipvsadm -Ln -t $node2_addr:30111 >/dev/null 2>&1"
	# No endpoint on node2: its virtual server holds the cluster endpoint (before: none).
	wait_real_servers node2 tcp "$node2_addr:30111" "$(pod_ip web):8080"

	corner_curl c2 "http://$node2_addr:30111/"
	corner_expect "hostname=web"
	corner_curl node2 "http://$node2_addr:30111/"
	corner_expect "hostname=web"
	corner_curl c2 "http://$corner_ext_ip:8011/"
	corner_expect "hostname=web"
	corner_curl node2 "http://$corner_ext_ip:8011/"
	corner_expect "hostname=web"
	corner_curl client "http://$node2_addr:30111/"
	corner_expect_silence
	corner_curl client "http://$corner_ext_ip:8011/"
	corner_expect_silence
	# node1 has the endpoint: Local as usual, the client's address kept.
	corner_curl client "http://$node1_addr:30111/"
	corner_expect "hostname=web" "client_address=$client_addr"

	ip -n client route del "$corner_ext_ip/32" 2>/dev/null
	kc delete-service corner-local >/dev/null
	verdict 11 "Local policy, node2 without endpoints: c2 and node2 reach web through node2's NodePort and external IP; the outside client times out (no RST, no ICMP); node1 keeps $client_addr" \
		no_failures "${corner_failures[@]}"
}
