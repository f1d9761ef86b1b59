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
# The Service is dual-stack (RequireDualStack, endpoints of both families): every check is made
# on its IPv4 cluster IP (verdict 18) and on its IPv6 one (verdict 18v6, the pods' and nodes'
# IPv6 addresses, the NodePort on node2's IPv6 address from the client's). Over IPv6 the refusal
# came about 1 s after the connect (IPv4: milliseconds) in the VM; curl still exits 7.
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

# topo_flush FAMILY: move the failures collected so far to that family's list
# (topo_failures4 or topo_failures6, the caller's).
topo_flush() {
	if [[ $1 == 6 ]]; then topo_failures6+=("${topo_failures[@]}"); else topo_failures4+=("${topo_failures[@]}"); fi
	topo_failures=()
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
# real servers are exactly the pods' :8080 (none given: none serves), the pods' addresses of
# VIP's family.
topo_wait_rs() {
	local node=$1 vs=$2 want p fam=4
	shift 2
	[[ $vs == \[* ]] && fam=6
	want=$(for p in "$@"; do echo "$(bracketed "$(pod_addr $fam "$p")"):8080"; done | sort | tr '\n' ' ' | sed 's/ $//')
	wait_until 30 topo_rs_are "$node" "$vs" "$want" ||
		topo_failures+=("$node's serving real servers for $vs: '$(topo_serving_rs "$node" "$vs")', want '$want'")
}

scenario_18() {
	heading "internalTrafficPolicy Local: pods and nodes reach only their node's endpoints, on both families"
	topo_failures=()
	local topo_failures4=() topo_failures6=() info ip4 ip6 fam ip h np where
	local -A refused=([4]= [6]=)
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: itp-local}
spec:
  internalTrafficPolicy: Local
  ipFamilyPolicy: RequireDualStack
  ports: [{port: 8018, targetPort: 8080, protocol: TCP}]
YAML
) || { verdict 18 "internalTrafficPolicy Local" false; verdict 18v6 "internalTrafficPolicy Local over IPv6" false; return; }
	ip4=$(cluster_ip_of 4 "$info") ip6=$(cluster_ip_of 6 "$info")
	kc set-endpoints itp-local $(dual_endpoints web@node1 s3@node1 s2@node2) ||
		{ verdict 18 "internalTrafficPolicy Local" false; verdict 18v6 "internalTrafficPolicy Local over IPv6" false; return; }
	show - "e2ectl apply-service itp-local.yaml && e2ectl set-endpoints itp-local web@node1 s3@node1 s2@node2  # RequireDualStack, each pod's IPv4 and IPv6 address" \
		"$(grep -E '^(CLUSTER_IPS|INTERNAL_TRAFFIC_POLICY)=' <<<"$info" | tr '\n' ' ')"
	[[ -n $ip4 && -n $ip6 ]] || topo_failures+=("CLUSTER_IPS '$(field CLUSTER_IPS "$info")': want one of each family")

	for fam in 4 6; do
		[[ $fam == 4 ]] && ip=$ip4 || ip=$ip6
		h=$(bracketed "$ip")
		topo_wait_rs node1 "$h:8018" web s3
		topo_wait_rs node2 "$h:8018" s2
		topo_reached c1 "http://$h:8018/" 24
		topo_only 24 "web s3"
		topo_reached node1 "http://$h:8018/" 24
		topo_only 24 "web s3"
		topo_reached c2 "http://$h:8018/" 24
		topo_only 24 s2
		topo_reached node2 "http://$h:8018/" 24
		topo_only 24 s2
		# A local endpoint sees the pod's own address.
		ask c1 "curl -gsS --max-time 5 http://$h:8018/ | grep -E '^(hostname|client_address)=' | tr '\n' ' '"
		[[ $answer == *"client_address=$(pod_addr $fam c1) "* ]] || topo_failures+=("${asked[-1]}: want client_address=$(pod_addr $fam c1)")
		topo_flush $fam
	done

	# node2 without a local endpoint.
	kc set-endpoints itp-local $(dual_endpoints web@node1 s3@node1) || topo_failures+=("set-endpoints without s2 failed")
	show - "e2ectl set-endpoints itp-local web@node1 s3@node1  # s2 gone: node2 has no local endpoint" ""
	for fam in 4 6; do
		[[ $fam == 4 ]] && ip=$ip4 || ip=$ip6
		h=$(bracketed "$ip")
		topo_wait_rs node2 "$h:8018"
		ask node2 "ipvsadm -Ln -t $h:8018 | tail -n +4"
		for where in c2 node2; do
			ask "$where" "curl -gsS --max-time 5 http://$h:8018/"
			((status == 7)) || topo_failures+=("${asked[-1]}: curl exit $status, want 7 (refused: IPVS's ICMP port unreachable)")
			refused[$fam]+="${refused[$fam]:+, }exit $status"
		done
		topo_reached c1 "http://$h:8018/" 12
		topo_only 12 "web s3"
		topo_flush $fam
	done

	# Reachable from outside (a NodePort, externalTrafficPolicy Cluster): the cluster IP keeps
	# internalTrafficPolicy Local.
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: itp-local}
spec:
  type: NodePort
  internalTrafficPolicy: Local
  ipFamilyPolicy: RequireDualStack
  ports: [{port: 8018, targetPort: 8080, nodePort: 30118, protocol: TCP}]
YAML
) || topo_failures+=("apply-service itp-local as a NodePort failed")
	show - "e2ectl apply-service itp-local.yaml  # type NodePort 30118, externalTrafficPolicy Cluster" \
		"$(grep -E '^(TYPE|EXTERNAL_TRAFFIC_POLICY|INTERNAL_TRAFFIC_POLICY)=' <<<"$info" | tr '\n' ' ')"
	for fam in 4 6; do
		[[ $fam == 4 ]] && ip=$ip4 np=$node2_addr || ip=$ip6 np=[$node2_addr6]
		h=$(bracketed "$ip")
		topo_wait_rs node2 "$np:30118" web s3
		topo_wait_rs node2 "$h:8018"
		topo_reached client "http://$np:30118/" 12
		topo_only 12 "web s3"
		ask c2 "curl -gsS --max-time 5 http://$h:8018/"
		((status == 7)) || topo_failures+=("${asked[-1]}: curl exit $status, want 7 (refused)")
		topo_flush $fam
	done

	kc delete-service itp-local >/dev/null
	verdict 18 "internalTrafficPolicy Local: c1 and node1 reach only web and s3, c2 and node2 only s2; without an endpoint on node2 its empty virtual server refuses c2 and node2 (curl ${refused[4]}), also when the Service is a NodePort that serves $client_addr through node2" \
		no_failures "${topo_failures4[@]}"
	verdict 18v6 "internalTrafficPolicy Local over IPv6 ([$ip6]:8018): c1 and node1 reach only web and s3, c2 and node2 only s2, web sees $(pod_ip6 c1); without an endpoint on node2 it refuses c2 and node2 (curl ${refused[6]}), also as a NodePort that serves $client_addr6 through [$node2_addr6]:30118" \
		no_failures "${topo_failures6[@]}"
}
