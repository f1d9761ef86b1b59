# 19-traffic-distribution.sh — issue 25, item 2: trafficDistribution and topology hints, with real
# traffic. No EndpointSlice controller runs here: e2ectl writes the hints it would write for each
# trafficDistribution (forZones: the endpoint's zone; PreferSameNode adds forNodes: its node). Like
# kube-proxy v1.36 (pkg/proxy/topology.go) ipvsproxy reads only the hints, never the field:
#   - same-node mode when every ready endpoint has a node hint and one names this node;
#   - else same-zone mode when every ready endpoint has a zone hint and one names this node's
#     topology.kubernetes.io/zone;
#   - else all ready endpoints (a half-hinted slice, or no endpoint for this node or zone, must
#     not blackhole traffic).
# node1 is zone-a (web, s3, c1), node2 zone-b (s2, c2). Steps, each checked by the nodes' real
# servers and 16 new connections from c1 and from c2:
#   A PreferClose, zone hints: c1 reaches web and s3, c2 only s2;
#   B PreferSameZone, s2 gone (no endpoint hinted for zone-b): c2 reaches web and s3, not nothing;
#   C s2 back (zone-b), node2 relabelled zone-a: node2 follows its label, c2 reaches web and s3;
#   D PreferSameNode (both nodes in zone-a, so zone hints alone would give all three): c1 reaches
#     web and s3, c2 only s2;
#   E s3 loses its hints: hints ignored, every node serves all three; c1 reaches s2 and c2 web
#     and s3, which D's hints kept from them.
# node2 goes back to zone-b and the Service is deleted at the end.
# The Service is dual-stack (RequireDualStack) and each endpoint has its IPv4 and IPv6 address in
# slices of the same hints: every step is checked on both cluster IPs, verdict 19 for IPv4 and
# 19v6 for IPv6.

# topo_service19 DISTRIBUTION: apply the Service with that trafficDistribution.
topo_service19() {
	local info
	# 2>&1: the API server's warning (PreferClose is deprecated in favour of PreferSameZone) is
	# shown with the answer, not in the middle of the verdicts.
	info=$(kc apply-service - 2>&1 <<YAML
apiVersion: v1
kind: Service
metadata: {name: topo}
spec:
  trafficDistribution: $1
  ipFamilyPolicy: RequireDualStack
  ports: [{port: 8019, targetPort: 8080, protocol: TCP}]
YAML
) || { topo_failures+=("apply-service topo ($1) failed: $info"); return 1; }
	topo_ip=$(cluster_ip_of 4 "$info") topo_ip6=$(cluster_ip_of 6 "$info")
	show - "e2ectl apply-service topo.yaml  # trafficDistribution: $1, RequireDualStack" "$(grep -E '^(CLUSTER_IPS|TRAFFIC_DISTRIBUTION)=|[Ww]arning' <<<"$info" | tr '\n' ' ')"
	[[ -n $topo_ip && -n $topo_ip6 ]] || { topo_failures+=("topo's CLUSTER_IPS '$(field CLUSTER_IPS "$info")': want one of each family"); return 1; }
}

# topo_endpoints19 SPEC...: set the Service's endpoints; SPEC is POD@NODE[+hints] (e2ectl's
# syntax with the pod's name for its address), written for the pod's IPv4 and IPv6 address.
topo_endpoints19() {
	kc set-endpoints topo $(dual_endpoints "$@") || topo_failures+=("set-endpoints topo $* failed")
	show - "e2ectl set-endpoints topo $*  # each pod's IPv4 and IPv6 address" ""
}

# topo_wait19 NODE POD...: topo_wait_rs on both cluster IPs, each family's failure in its list.
topo_wait19() {
	local node=$1
	shift
	topo_wait_rs "$node" "$topo_ip:8019" "$@"
	topo_flush 4
	topo_wait_rs "$node" "[$topo_ip6]:8019" "$@"
	topo_flush 6
}

# topo_step19 STEP C1_ALLOWED C2_ALLOWED [C1_REQUIRED C2_REQUIRED]: both clients' answers on
# each cluster IP, each only from the pods allowed and from each pod required (space-separated
# lists; required defaults to allowed).
topo_step19() {
	local n=16 c1_got fam h
	for fam in 4 6; do
		[[ $fam == 4 ]] && h=$topo_ip || h=[$topo_ip6]
		topo_reached c1 "http://$h:8019/" $n
		c1_got=$answer
		topo_only $n "$2" "${4:-$2}"
		topo_reached c2 "http://$h:8019/" $n
		topo_only $n "$3" "${5:-$3}"
		if [[ $fam == 4 ]]; then topo_steps+=("$1 c1 $c1_got, c2 $answer"); else topo_steps6+=("$1 c1 $c1_got, c2 $answer"); fi
		topo_flush $fam
	done
}

scenario_19() {
	heading "trafficDistribution: topology hints narrow each node's endpoints; incomplete hints are ignored"
	topo_failures=() topo_steps=() topo_steps6=()
	local topo_failures4=() topo_failures6=() zone=topology.kubernetes.io/zone

	# A: PreferClose.
	topo_service19 PreferClose || {
		verdict 19 "trafficDistribution" no_failures "${topo_failures[@]}"
		verdict 19v6 "trafficDistribution over IPv6" false
		return
	}
	topo_endpoints19 web@node1+zones=zone-a s3@node1+zones=zone-a s2@node2+zones=zone-b
	topo_wait19 node1 web s3
	topo_wait19 node2 s2
	topo_step19 A "web s3" "s2"

	# B: PreferSameZone; zone-b's endpoint gone, so node2 has no hint for its zone.
	topo_service19 PreferSameZone
	topo_endpoints19 web@node1+zones=zone-a s3@node1+zones=zone-a
	topo_wait19 node2 web s3
	topo_step19 B "web s3" "web s3"

	# C: s2 back, hinted for zone-b; node2 moves to zone-a.
	topo_endpoints19 web@node1+zones=zone-a s3@node1+zones=zone-a s2@node2+zones=zone-b
	topo_wait19 node2 s2
	kc label-node node2 "$zone=zone-a" >/dev/null || topo_failures+=("label-node node2 $zone=zone-a failed")
	show - "e2ectl label-node node2 $zone=zone-a" ""
	topo_wait19 node2 web s3
	topo_step19 C "web s3" "web s3"

	# D: PreferSameNode: node hints decide, though both nodes share zone-a.
	topo_service19 PreferSameNode
	topo_endpoints19 web@node1+zones=zone-a+nodes=node1 s3@node1+zones=zone-a+nodes=node1 s2@node2+zones=zone-a+nodes=node2
	topo_wait19 node1 web s3
	topo_wait19 node2 s2
	topo_step19 D "web s3" "s2"

	# E: one endpoint without hints: every node uses every endpoint.
	topo_endpoints19 web@node1+zones=zone-a+nodes=node1 s3@node1 s2@node2+zones=zone-a+nodes=node2
	topo_wait19 node1 web s3 s2
	topo_wait19 node2 web s3 s2
	# twos favours the endpoint with the fewest connections, and IPVS still counts the earlier
	# steps' (TIME_WAIT, 2 min): each client must reach those its node hints excluded in D.
	topo_step19 E "web s3 s2" "web s3 s2" "s2" "web s3"

	kc label-node node2 "$zone=zone-b" >/dev/null || topo_failures+=("label-node node2 $zone=zone-b (back) failed")
	kc delete-service topo >/dev/null
	topo_flush 4
	verdict 19 "trafficDistribution and hints (kube-proxy's rules): $(printf '%s; ' "${topo_steps[@]}")" \
		no_failures "${topo_failures4[@]}"
	verdict 19v6 "trafficDistribution and hints over IPv6 ([$topo_ip6]:8019): $(printf '%s; ' "${topo_steps6[@]}")" \
		no_failures "${topo_failures6[@]}"
}
