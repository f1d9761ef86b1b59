# 26-foreign-virtual-server.sh — issue 14 item 10: a virtual server someone else made is never
# adopted because a Service names its address. On node1 an operator's own IPVS service
# 203.0.113.26:80 (scheduler rr, real server s3) serves an address on lo; then Service
# "foreign26" names 203.0.113.26 as an externalIP. Across two full syncs (sync period 10 s) the
# foreign virtual server keeps its scheduler and real server and keeps answering from s3, the
# Service gets a PortConflict Event, and nothing of the Service is bound or added for that key.

readonly foreign_ip=203.0.113.26

scenario_26() {
	heading "A foreign virtual server is never adopted"
	local why=() before after
	ip -n node1 addr add "$foreign_ip/32" dev lo
	ip netns exec node1 ipvsadm -A -t "$foreign_ip:80" -s rr
	ip netns exec node1 ipvsadm -a -t "$foreign_ip:80" -r "$(pod_ip s3):8080" -m
	before=$(vs_shape node1 "$foreign_ip:80")
	kc apply-service - >/dev/null <<YAML || { verdict 26 "foreign virtual server: apply" false; return; }
apiVersion: v1
kind: Service
metadata: {name: foreign26}
spec:
  type: ClusterIP
  externalIPs: [$foreign_ip]
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
YAML
	kc set-endpoints foreign26 "$(pod_ip web)@node1" || { verdict 26 "foreign virtual server: endpoints" false; return; }
	local svc_ip full
	svc_ip=$(field CLUSTER_IP "$(kc service-info foreign26)")
	wait_real_servers node1 tcp "$svc_ip:80" "$(pod_ip web):8080"
	# Two full syncs later (a full sync used to rewrite what it took for its own).
	full=$(metric node1 ipvsproxy_sync_full_total)
	wait_until 40 bash -c "(( \$(ip netns exec node1 curl -s --max-time 5 http://127.0.0.1:10249/metrics | awk '\$1 == \"ipvsproxy_sync_full_total\" { print \$2 }') >= $full + 2 ))" ||
		why+=("node1 did not run two full syncs")
	after=$(vs_shape node1 "$foreign_ip:80")
	show node1 "ipvsadm -Ln -t $foreign_ip:80" "$after"
	[[ $after == "$before" ]] || why+=("the foreign virtual server changed: before '$(oneline "$before")' after '$(oneline "$after")'")
	ip -n client route replace "$foreign_ip/32" via "$node1_addr"
	ask client "curl -s --max-time 5 $foreign_ip | grep hostname"
	[[ $answer == "hostname=s3" ]] || why+=("the foreign virtual server answered '$answer', want hostname=s3")
	ask node1 "ip -br addr show kube-ipvs0 | grep -c $foreign_ip"
	[[ $answer == 0 ]] || why+=("$foreign_ip bound on kube-ipvs0")
	ask node1 "ipset test KUBE-IPVS-SERVICES $foreign_ip,tcp:80"
	((status != 0)) || why+=("KUBE-IPVS-SERVICES holds $foreign_ip,tcp:80")
	ask node1 "ipset test KUBE-IPVS-OWNED $foreign_ip,tcp:80"
	((status != 0)) || why+=("the foreign virtual server is recorded as ipvsproxy's")
	wait_until 20 bash -c "events_for foreign26 | grep -q PortConflict"
	ask - "events_for foreign26"
	[[ $answer == *PortConflict*"did not create"* ]] || why+=("no PortConflict Event naming the foreign virtual server")
	ip -n client route del "$foreign_ip/32" via "$node1_addr" 2>/dev/null
	kc delete-service foreign26 >/dev/null
	wait_until 30 bash -c "! ip netns exec node1 ipvsadm -Ln -t $svc_ip:80 >/dev/null 2>&1"
	# The Service's deletion leaves the foreign one too; then the operator removes it.
	[[ $(vs_shape node1 "$foreign_ip:80") == "$before" ]] || why+=("deleting the Service changed the foreign virtual server: $(oneline "$(vs_shape node1 "$foreign_ip:80")")")
	ip netns exec node1 ipvsadm -D -t "$foreign_ip:80"
	ip -n node1 addr del "$foreign_ip/32" dev lo
	verdict 26 "foreign virtual server: $foreign_ip:80 (rr, s3) unchanged across two full syncs and answering, foreign26 gets a PortConflict Event" \
		no_failures "${why[@]}"
}

# vs_shape NODE VIP:PORT: a TCP virtual server's scheduler and real servers with their forwarding
# and weight, without the connection counters (traffic changes those).
vs_shape() {
	ip netns exec "$1" ipvsadm -Ln -t "$2" 2>&1 | awk '$1 == "->" { NF = 4 } { print }'
}
