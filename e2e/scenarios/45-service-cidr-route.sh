# 45-service-cidr-route.sh — issue 9: the Service CIDR is local through one route on kube-ipvs0,
# not one bound address per cluster IP. The API server's default ServiceCIDR object ("kubernetes",
# from --service-cluster-ip-range 10.96.0.0/16) names the range. Traffic to a cluster IP from a
# pod on either node, from the node itself and from the endpoint itself (hairpin) is served as
# before; a port the node listens on is refused on an unused cluster IP and on a used one.

readonly service_range=10.96.0.0/16 unused_cluster_ip=10.96.255.250 host_port=9099

scenario_45() {
	heading "Service CIDR routed local on kube-ipvs0: one route, no address per cluster IP"
	local info ip
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: routed, labels: {app: source-ip-app}}
spec:
  type: ClusterIP
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
YAML
) || { verdict 45 "Service CIDR route" false; return; }
	ip=$(field CLUSTER_IP "$info")
	kc set-endpoints routed "$(pod_ip web)@node1" || { verdict 45 "Service CIDR route" false; return; }
	wait_real_servers node1 tcp "$ip:80" "$(pod_ip web):8080"
	wait_real_servers node2 tcp "$ip:80" "$(pod_ip web):8080"
	local failures=()

	ask - "ip -n node1 route show table local dev kube-ipvs0 proto 233"
	[[ $answer == *"local $service_range scope host"* ]] || failures+=("no local route of $service_range on node1's kube-ipvs0: '$answer'")
	ask - "ip -n node2 route show table local dev kube-ipvs0 proto 233"
	[[ $answer == *"local $service_range scope host"* ]] || failures+=("no local route of $service_range on node2's kube-ipvs0: '$answer'")
	# The dual-stack range's IPv6 half is one route too.
	ask - "ip -n node1 -6 route show table local dev kube-ipvs0 proto 233"
	[[ $answer == *"local 2001:db8:96::/112"* ]] || failures+=("no local route of 2001:db8:96::/112 on node1's kube-ipvs0: '$answer'")
	ask - "ip -n node1 -4 -o addr show dev kube-ipvs0 | awk '{ print \$4 }' | grep '^10\\.96\\.' | paste -sd ' '"
	[[ $answer == "10.96.0.0/32" ]] || failures+=("node1's kube-ipvs0 holds '$answer' of the range, want only the anchor 10.96.0.0/32")

	ask c1 "curl -s --max-time 5 $ip | grep client_address"
	[[ $answer == "client_address=$(pod_ip c1)" ]] || failures+=("c1 (node1) -> $ip: '$answer'")
	ask c2 "curl -s --max-time 5 $ip | grep client_address"
	[[ $answer == "client_address=$(pod_ip c2)" ]] || failures+=("c2 (node2) -> $ip: '$answer'")
	# From the node itself: masqueraded (not from the cluster CIDR), answered.
	ask node1 "curl -s --max-time 5 $ip | grep -c client_address"
	[[ $answer == 1 ]] || failures+=("node1 itself -> $ip: '$answer'")
	# Hairpin: the only endpoint reaches itself through its Service.
	ask web "curl -s --max-time 5 $ip | grep -c client_address"
	[[ $answer == 1 ]] || failures+=("web (its own endpoint) -> $ip: '$answer'")

	# A host port on node1: reachable on the node's address, refused on service addresses.
	ip netns exec node1 "$ECHOSERVER" -name node1-host -http ":$host_port" -udp '' >"$E2E_LOGS/scenario-45-host-port.log" 2>&1 &
	local host_pid=$!
	wait_until 20 bash -c "ip netns exec node1 ss -Hltn 'sport = :$host_port' | grep -q ."
	ask c1 "curl -s --max-time 5 $node1_addr:$host_port | grep -c client_address"
	[[ $answer == 1 ]] || failures+=("the host port is not even reachable on $node1_addr: '$answer'")
	ask c1 "curl -sS --connect-timeout 3 --max-time 5 $unused_cluster_ip:$host_port 2>&1; echo exit=\$?"
	# Refused at once (curl exit 7, REJECT's ICMP port unreachable). Without the rule the route would
	# make the address local and the host port would answer; a DROP would time out (exit 28).
	[[ $answer == *"exit=7" ]] || failures+=("the host port on the unused cluster IP $unused_cluster_ip was not refused: '$answer'")
	ask c1 "curl -sS --connect-timeout 3 --max-time 5 $ip:$host_port 2>&1; echo exit=\$?"
	[[ $answer == *"exit=7" ]] || failures+=("the host port on the cluster IP $ip was not refused: '$answer'")
	kill "$host_pid" 2>/dev/null
	wait "$host_pid" 2>/dev/null

	kc delete-service routed >/dev/null
	# The next scenario compares the kernel before and after a restart: leave it settled, with
	# this Service's virtual servers gone from both nodes.
	wait_until 60 vs_gone node1 "$ip" || failures+=("node1 still has a virtual server of $ip 60 s after its Service was deleted")
	wait_until 60 vs_gone node2 "$ip" || failures+=("node2 still has a virtual server of $ip 60 s after its Service was deleted")
	verdict 45 "Service CIDR route: one local route per node, cluster IPs unbound, pods/node/hairpin served, host port refused on cluster IPs" \
		no_failures "${failures[@]}"
}

# vs_gone NODE IP: the node holds no virtual server on IP.
vs_gone() {
	! ip netns exec "$1" ipvsadm -Ln | grep -qF " $2:"
}
