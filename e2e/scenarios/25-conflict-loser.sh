# 25-conflict-loser.sh — issue 14 item 8: when two Services want the same virtual server the
# older keeps it and the loser programs nothing for it. The older Service "winner25" has
# externalIP 203.0.113.25 with externalTrafficPolicy Local, so its pod must see the client's own
# address; the newer "loser25" names the same externalIP:port with policy Cluster, whose
# KUBE-EXTERNAL-IP member would masquerade the winner's traffic. The client reaches the
# externalIP through node1 (a /32 route, as an upstream router would have).

readonly conflict_ip=203.0.113.25

scenario_25() {
	heading "A conflict's loser programs nothing for the key it lost"
	local why=()
	kc apply-service - >/dev/null <<YAML || { verdict 25 "conflict loser: apply winner25" false; return; }
apiVersion: v1
kind: Service
metadata: {name: winner25}
spec:
  type: ClusterIP
  externalIPs: [$conflict_ip]
  externalTrafficPolicy: Local
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
YAML
	kc set-endpoints winner25 "$(pod_ip web)@node1" || { verdict 25 "conflict loser: endpoints" false; return; }
	wait_real_servers node1 tcp "$conflict_ip:80" "$(pod_ip web):8080"
	# Created later: the loser.
	sleep 1
	kc apply-service - >/dev/null <<YAML || { verdict 25 "conflict loser: apply loser25" false; return; }
apiVersion: v1
kind: Service
metadata: {name: loser25}
spec:
  type: ClusterIP
  externalIPs: [$conflict_ip]
  externalTrafficPolicy: Cluster
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
YAML
	kc set-endpoints loser25 "$(pod_ip s2)@node2" || { verdict 25 "conflict loser: endpoints" false; return; }
	local loser_ip
	loser_ip=$(field CLUSTER_IP "$(kc service-info loser25)")
	# The loser's own cluster IP is programmed: its sync has happened.
	wait_real_servers node1 tcp "$loser_ip:80" "$(pod_ip s2):8080"
	ip -n client route replace "$conflict_ip/32" via "$node1_addr"
	ask node1 "ipvsadm -Ln -t $conflict_ip:80"
	ask node1 "ipset test KUBE-EXTERNAL-IP $conflict_ip,tcp:80"
	((status != 0)) || why+=("the loser's KUBE-EXTERNAL-IP member $conflict_ip,tcp:80 exists")
	ask client "curl -s --max-time 5 $conflict_ip | grep client_address"
	[[ $answer == "client_address=$client_addr" ]] || why+=("through the winner's externalIP the pod saw '$answer', want client_address=$client_addr (no SNAT under Local)")
	[[ $(real_servers node1 tcp "$conflict_ip:80") == "$(pod_ip web):8080" ]] || why+=("the winner lost its real server")
	wait_until 20 bash -c "events_for loser25 | grep -q PortConflict"
	ask - "events_for loser25"
	[[ $answer == *PortConflict* ]] || why+=("no PortConflict Event on loser25")
	ip -n client route del "$conflict_ip/32" via "$node1_addr" 2>/dev/null
	kc delete-service loser25 >/dev/null
	kc delete-service winner25 >/dev/null
	verdict 25 "conflict loser: winner25's Local externalIP keeps $client_addr, loser25 has no member for it and a PortConflict Event" \
		no_failures "${why[@]}"
}

# events_for NAME: reason and message of the Events on Service NAME (namespace default), one pair a
# line, from the API server with the admin certificate (which indents its JSON for curl).
events_for() {
	local out
	out=$(curl -sS --fail --max-time 20 --cacert "$E2E_PKI/ca.crt" --cert "$E2E_PKI/admin.crt" --key "$E2E_PKI/admin.key" \
		"https://$E2E_HOST_ADDR:6443/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D$1" 2>&1) ||
		{ echo "GET events: $out"; return 1; }
	grep -o '"\(reason\|message\)": *"[^"]*"' <<<"$out" | paste - - | grep . || { echo "no Event in: ${out:0:300}"; return 1; }
}
export -f events_for
