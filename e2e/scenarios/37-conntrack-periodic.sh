# 37-conntrack-periodic.sh — the periodic conntrack reconcile (issue 8 item 2, kubernetes#112604)
# deletes a stale UDP flow that no event will ever touch. Scenario 35's stale flow is also healed
# by IPVS itself (an expired connection whose real server is gone takes its conntrack entry with
# it); this one is not: the flow is written into node1's conntrack table directly (conntrack -I),
# its reply source an address that is no endpoint, so no IPVS connection owns it. On a node whose
# FORWARD policy is DROP (KUBE-FORWARD accepts only marked or ESTABLISHED traffic) the endpoint's
# replies then match no flow and are dropped for as long as the client sends. The daemon is
# running and sees no change; its next full sync (every --ipvs-sync-period) must delete the flow.

readonly ct37_src_port=40037 ct37_a=10.244.1.37 ct37_b=10.244.2.37 ct37_dead=10.244.9.99

scenario_37() {
	heading "UDP flows are reconciled periodically: a stale flow no event deletes is gone within a sync period"
	"$topo" add-pod node1 u37a "$ct37_a" >/dev/null && "$topo" echo u37a -http '' -udp :8081 &&
		"$topo" add-pod node2 u37b "$ct37_b" >/dev/null && "$topo" echo u37b -http '' -udp :8081 ||
		{ verdict 37 "UDP periodic reconcile: pods" false; return; }
	local info ip
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: udp37}
spec:
  ports: [{port: 5354, targetPort: 8081, protocol: UDP}]
YAML
) || { verdict 37 "UDP periodic reconcile: Service" false; return; }
	ip=$(field CLUSTER_IP "$info")
	kc set-endpoints udp37 "$ct37_a@node1" "$ct37_b@node2" || { verdict 37 "UDP periodic reconcile: endpoints" false; return; }
	wait_real_servers node1 udp "$ip:5354" "$ct37_a:8081 $ct37_b:8081"
	ip netns exec node1 iptables -w -P FORWARD DROP
	ip netns exec node1 conntrack -I -p udp -s "$(pod_ip c1)" --sport "$ct37_src_port" -d "$ip" --dport 5354 \
		-r "$ct37_dead" --reply-port-src 8081 -q "$(pod_ip c1)" --reply-port-dst "$ct37_src_port" -t 600 >/dev/null 2>&1
	show node1 "iptables -P FORWARD DROP; conntrack -I -p udp -s $(pod_ip c1) --sport $ct37_src_port -d $ip --dport 5354 -r $ct37_dead ...; conntrack -L --orig-dst $ip" \
		"$(ip netns exec node1 conntrack -L -p udp --orig-dst "$ip" 2>/dev/null)"
	local replies=$E2E_LOGS/udp37-replies.log t0
	: >"$replies"
	t0=$(now)
	ip netns exec c1 bash -c "
		while sleep 0.3; do echo ping; done |
			socat - UDP:$ip:5354,sourceport=$ct37_src_port |
			while read -r line; do [[ \$line == hostname=* ]] && echo \"\$(date +%s.%N) \$line\"; done" >>"$replies" 2>&1 &
	local sender=$!
	# The next full sync is at most one sync period away; allow two, and emulation's slowness.
	local limit=$((2 * ${sync_period%s} + 10)) resumed
	while (($(since "$t0" | cut -d. -f1) <= limit)); do
		grep -q hostname= "$replies" && break
		sleep 0.5
	done
	sleep 1
	kill_tree "$sender"
	resumed=$(awk -v t="$t0" '$2 ~ /^hostname=/ { printf "%.1f", $1 - t; exit }' "$replies")
	ask node1 "conntrack -L -p udp --orig-dst $ip 2>/dev/null"
	ip netns exec node1 iptables -w -P FORWARD ACCEPT
	"$topo" del-pod u37a >/dev/null 2>&1
	"$topo" del-pod u37b >/dev/null 2>&1
	local when=never
	[[ -z $resumed ]] || when="after ${resumed}s"
	verdict 37 "UDP periodic reconcile: the injected stale flow was deleted and replies came within ${limit}s ($when)" \
		bash -c "[[ -n '$resumed' ]] || { echo 'no reply within ${limit}s: the stale flow stayed'; exit 1; }"
}
