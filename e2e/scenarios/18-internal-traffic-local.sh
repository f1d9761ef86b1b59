# 18-internal-traffic-local.sh — issue 25, item 2: `internalTrafficPolicy: Local`, with real
# traffic. Endpoints web and s3 on node1, s2 on node2:
#   - c1 and node1 reach only web and s3 over 24 new connections each (both seen), c2 and node2
#     only s2; web sees c1's own address (no SNAT);
#   - s2 removed: node2 has no local endpoint. Its cluster-IP virtual server stays, with no real
#     server that takes connections (s2 drains at weight 0), and c2 and node2 are refused at once
#     (IPVS answers a virtual server without a usable real server with ICMP port unreachable, curl
#     exit 7); c1 is still served. kube-proxy v1.36's IPVS mode programs the same empty virtual
#     server for a ClusterIP Service (CategorizeEndpoints gives it no cluster endpoints), so the
#     kernel answers the same; its iptables mode DROPs instead (kubernetes#121371);
#   - the Service becomes a NodePort (externalTrafficPolicy Cluster): the NodePort on node2
#     serves the outside client from web and s3, while its cluster IP still refuses c2. Here
#     kube-proxy's IPVS mode differs: for a Service reachable from outside it gives the cluster
#     IP the cluster endpoints when the node has none of its own (the kubernetes#97081 code path
#     of syncEndpoint, meant for externalTrafficPolicy), so c2 would be served. ipvsproxy keeps to
#     the API's definition (traffic dropped when no node-local endpoint), as kube-proxy's iptables
#     and nftables modes do.
#
# topo_reached and topo_only (below) serve scenarios 19 and 23 too.

# topo_reached WHERE URL N: N requests, each on a new connection (Connection: close), from WHERE;
# $answer is "NAME:COUNT ..." of the hostnames that answered, sorted, or curl's failure.
topo_reached() {
	ask "$1" "curl -sS --max-time 5 -H 'Connection: close' '$2?n=[1-$3]' | sed -n 's/^hostname=//p' | sort | uniq -c | awk '{ printf \"%s%s:%s\", sep, \$2, \$1; sep = \" \" }'"
}

# topo_only N ALLOWED [REQUIRED]: the last topo_reached answered all N requests, only from pods
# in ALLOWED and from every pod in REQUIRED (space-separated lists; REQUIRED defaults to ALLOWED);
# else a failure is collected in topo_failures.
topo_only() {
	local n=$1 allowed=" $2 " required=${3:-$2} got name total=0 bad=
	for got in $answer; do
		name=${got%%:*}
		[[ $allowed == *" $name "* ]] || bad+=" $name"
		[[ ${got##*:} =~ ^[0-9]+$ ]] && total=$((total + ${got##*:}))
	done
	for name in $required; do
		[[ " $answer" == *" $name:"* ]] || bad+=" no $name"
	done
	if [[ -n $bad || $total != "$n" ]]; then
		topo_failures+=("${asked[-1]}: want all $n from$allowed(each of $required)")
	fi
}

# topo_serving_rs NODE VIP:PORT: the virtual server's real servers with a weight above 0, sorted;
# a removed endpoint stays at weight 0 while its connections drain, and takes no new one.
topo_serving_rs() {
	ip netns exec "$1" ipvsadm -Ln -t "$2" 2>/dev/null | awk '$1 == "->" && $2 != "RemoteAddress:Port" && $4 > 0 { print $2 }' | sort | tr '\n' ' ' | sed 's/ $//'
}

# topo_rs_are NODE VIP:PORT WANT: the virtual server exists and its serving real servers are WANT.
topo_rs_are() {
	ip netns exec "$1" ipvsadm -Ln -t "$2" >/dev/null 2>&1 && [[ $(topo_serving_rs "$1" "$2") == "$3" ]]
}

# topo_wait_rs NODE VIP:PORT POD...: wait until the node's virtual server exists and its serving
# real servers are exactly the pods' :8080 (none given: none serves).
topo_wait_rs() {
	local node=$1 vs=$2 want p
	shift 2
	want=$(for p in "$@"; do echo "$(pod_ip "$p"):8080"; done | sort | tr '\n' ' ' | sed 's/ $//')
	wait_until 30 topo_rs_are "$node" "$vs" "$want" ||
		topo_failures+=("$node's serving real servers for $vs: '$(topo_serving_rs "$node" "$vs")', want '$want'")
}

scenario_18() {
	heading "internalTrafficPolicy Local: pods and nodes reach only their node's endpoints"
	topo_failures=()
	local info ip
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: itp-local}
spec:
  internalTrafficPolicy: Local
  ports: [{port: 8018, targetPort: 8080, protocol: TCP}]
YAML
) || { verdict 18 "internalTrafficPolicy Local" false; return; }
	ip=$(field CLUSTER_IP "$info")
	kc set-endpoints itp-local "$(pod_ip web)@node1" "$(pod_ip s3)@node1" "$(pod_ip s2)@node2" ||
		{ verdict 18 "internalTrafficPolicy Local" false; return; }
	show - "e2ectl apply-service itp-local.yaml && e2ectl set-endpoints itp-local web@node1 s3@node1 s2@node2" \
		"$(grep -E '^(CLUSTER_IP|INTERNAL_TRAFFIC_POLICY)=' <<<"$info" | tr '\n' ' ')"
	topo_wait_rs node1 "$ip:8018" web s3
	topo_wait_rs node2 "$ip:8018" s2

	topo_reached c1 "http://$ip:8018/" 24
	topo_only 24 "web s3"
	topo_reached node1 "http://$ip:8018/" 24
	topo_only 24 "web s3"
	topo_reached c2 "http://$ip:8018/" 24
	topo_only 24 s2
	topo_reached node2 "http://$ip:8018/" 24
	topo_only 24 s2
	# A local endpoint sees the pod's own address.
	ask c1 "curl -sS --max-time 5 http://$ip:8018/ | grep -E '^(hostname|client_address)=' | tr '\n' ' '"
	[[ $answer == *"client_address=$(pod_ip c1)"* ]] || topo_failures+=("${asked[-1]}: want client_address=$(pod_ip c1)")

	# node2 without a local endpoint.
	kc set-endpoints itp-local "$(pod_ip web)@node1" "$(pod_ip s3)@node1" || topo_failures+=("set-endpoints without s2 failed")
	show - "e2ectl set-endpoints itp-local web@node1 s3@node1  # s2 gone: node2 has no local endpoint" ""
	topo_wait_rs node2 "$ip:8018"
	ask node2 "ipvsadm -Ln -t $ip:8018 | tail -n +4"
	local refused=() where
	for where in c2 node2; do
		ask "$where" "curl -sS --max-time 5 http://$ip:8018/"
		((status == 7)) || topo_failures+=("${asked[-1]}: curl exit $status, want 7 (refused: IPVS's ICMP port unreachable)")
		refused+=("exit $status")
	done
	topo_reached c1 "http://$ip:8018/" 12
	topo_only 12 "web s3"

	# Reachable from outside (a NodePort, externalTrafficPolicy Cluster): the cluster IP keeps
	# internalTrafficPolicy Local.
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: itp-local}
spec:
  type: NodePort
  internalTrafficPolicy: Local
  ports: [{port: 8018, targetPort: 8080, nodePort: 30118, protocol: TCP}]
YAML
) || topo_failures+=("apply-service itp-local as a NodePort failed")
	show - "e2ectl apply-service itp-local.yaml  # type NodePort 30118, externalTrafficPolicy Cluster" \
		"$(grep -E '^(TYPE|EXTERNAL_TRAFFIC_POLICY|INTERNAL_TRAFFIC_POLICY)=' <<<"$info" | tr '\n' ' ')"
	topo_wait_rs node2 "$node2_addr:30118" web s3
	topo_wait_rs node2 "$ip:8018"
	topo_reached client "http://$node2_addr:30118/" 12
	topo_only 12 "web s3"
	ask c2 "curl -sS --max-time 5 http://$ip:8018/"
	((status == 7)) || topo_failures+=("${asked[-1]}: curl exit $status, want 7 (refused)")

	kc delete-service itp-local >/dev/null
	verdict 18 "internalTrafficPolicy Local: c1 and node1 reach only web and s3, c2 and node2 only s2; without an endpoint on node2 its empty virtual server refuses c2 and node2 (curl ${refused[*]}), also when the Service is a NodePort that serves $client_addr through node2" \
		no_failures "${topo_failures[@]}"
}
