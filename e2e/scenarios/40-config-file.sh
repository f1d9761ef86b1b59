# 40-config-file.sh — kube-proxy's own configuration drives the daemon (issue 11). node2's
# daemon is started the way kubeadm's kube-proxy DaemonSet starts kube-proxy: `--config
# config.conf --hostname-override NODE`, where config.conf is kubeadm v1.36's default
# (cmd/ipvsproxy/testdata/kubeadm-config.conf) edited as an IPVS cluster has it: mode ipvs,
# scheduler rr, conntrack timeouts, and one Windows-only field that must be named in the
# start-up warning. Then the file is changed twice, as a ConfigMap volume changes (an atomic
# rename): a broken edit is logged and waited out, a valid one restarts the daemon in place
# (same pid, exec) with the new scheduler. node2 gets its usual daemon back at the end.

readonly config40_dir=/run/e2e-config40

# config40_file OUT SCHEDULER MODE: kubeadm's default config.conf with this scenario's settings.
config40_file() {
	sed -e "s#kubeconfig: /var/lib/kube-proxy/kubeconfig.conf#kubeconfig: $PROXIER_KUBECONFIG#" \
		-e "s/^mode: \"\"/mode: $3/" \
		-e "/^ipvs:/,/^[a-z]/ s/^  scheduler: \"\"/  scheduler: $2/" \
		-e "/^ipvs:/,/^[a-z]/ s/^  syncPeriod: 0s/  syncPeriod: $sync_period/" \
		-e "/^ipvs:/,/^[a-z]/ s/^  minSyncPeriod: 0s/  minSyncPeriod: $min_sync_period/" \
		-e "/^conntrack:/,/^[a-z]/ s/^  tcpEstablishedTimeout: null/  tcpEstablishedTimeout: 2h/" \
		-e "/^conntrack:/,/^[a-z]/ s/^  udpTimeout: 0s/  udpTimeout: 45s/" \
		-e "/^winkernel:/,/^[a-z]/ s/^  enableDSR: false/  enableDSR: true/" \
		"$repo/cmd/ipvsproxy/testdata/kubeadm-config.conf" >"$1.tmp" && mv "$1.tmp" "$1"
}

# start_proxier_from_file NODE FILE: as kube-proxy's DaemonSet runs kube-proxy.
start_proxier_from_file() {
	echo "--- start from $2 $(date -u +%T.%N)" >>"$E2E_LOGS/ipvsproxy-$1.log"
	ip netns exec "$1" "$ipvsproxy" run --config "$2" --hostname-override "$1" --lock-file "$(node_lock "$1")" \
		>>"$E2E_LOGS/ipvsproxy-$1.log" 2>&1 &
	echo $! >"$E2E_LOGS/ipvsproxy-$1.pid"
}

# vs_scheduler NODE VIP:PORT: the scheduler of a TCP virtual server.
vs_scheduler() {
	ip netns exec "$1" ipvsadm -Ln -t "$2" 2>/dev/null | awk '$1 == "TCP" { print $3 }'
}

scenario_40() {
	heading "kube-proxy's config.conf drives the daemon; a change restarts it"
	mkdir -p "$config40_dir"
	local conf=$config40_dir/config.conf info ip
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: config40}
spec:
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
YAML
) || { verdict 40 "config file" false; return; }
	ip=$(field CLUSTER_IP "$info")
	kc set-endpoints config40 "$(pod_ip s2)@node2" || { verdict 40 "config file" false; return; }

	# A file kube-proxy would refuse to run as IPVS is refused before anything is touched.
	config40_file "$config40_dir/iptables.conf" rr iptables
	ask node2 "timeout 20 ipvsproxy run --config $config40_dir/iptables.conf --hostname-override node2"
	local refused=$answer refused_status=$status

	config40_file "$conf" rr ipvs
	show - "diff kubeadm-config.conf config.conf  # kubeadm v1.36's default, edited" \
		"$(diff "$repo/cmd/ipvsproxy/testdata/kubeadm-config.conf" "$conf" | grep '^>')"
	stop_proxier node2
	local log_from
	log_from=$(($(wc -l <"$E2E_LOGS/ipvsproxy-node2.log") + 1))
	start_proxier_from_file node2 "$conf"
	local pid
	pid=$(<"$E2E_LOGS/ipvsproxy-node2.pid")
	show node2 "ipvsproxy run --config $conf --hostname-override node2 &" ""
	local synced=ok
	wait_until 120 proxier_synced node2 || synced=
	wait_until 30 bash -c "[[ \$(ip netns exec node2 ipvsadm -Ln -t $ip:80 2>/dev/null | awk '\$1 == \"TCP\" { print \$3 }') == rr ]]"
	ask node2 "ipvsadm -Ln -t $ip:80"
	local sched1
	sched1=$(vs_scheduler node2 "$ip:80")
	ask node2 "cat /proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established /proc/sys/net/netfilter/nf_conntrack_udp_timeout"
	local timeouts
	timeouts=$(tr '\n' ' ' <<<"$answer")
	ask c2 "curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://$ip/"
	local code=$answer
	local warning
	warning=$(tail -n "+$log_from" "$E2E_LOGS/ipvsproxy-node2.log" | grep 'does not honour these KubeProxyConfiguration fields' | head -n1)
	show node2 "grep 'does not honour' ipvsproxy.log" "$warning"

	# A broken edit (an unknown field) is waited out; the daemon keeps running as it was.
	cp "$conf" "$conf.new" && echo "ipvsScheduler: wrr" >>"$conf.new" && mv "$conf.new" "$conf"
	wait_until 20 bash -c "tail -n +$log_from '$E2E_LOGS/ipvsproxy-node2.log' | grep -q 'not valid; keeping the running configuration'"
	local kept=
	[[ -e /proc/$pid ]] && [[ $(vs_scheduler node2 "$ip:80") == rr ]] && kept=ok
	show node2 "echo 'ipvsScheduler: wrr' >> config.conf  # a typo" \
		"$(tail -n "+$log_from" "$E2E_LOGS/ipvsproxy-node2.log" | grep -o 'not valid; keeping[^"]*' | head -n1)"

	# A valid edit restarts the daemon in place with the new scheduler.
	local t0
	t0=$(now)
	config40_file "$conf" wrr ipvs
	wait_until 60 bash -c "[[ \$(ip netns exec node2 ipvsadm -Ln -t $ip:80 2>/dev/null | awk '\$1 == \"TCP\" { print \$3 }') == wrr ]]"
	local took
	took=$(since "$t0")
	ask node2 "ipvsadm -Ln -t $ip:80  # after scheduler: wrr, ${took}s"
	local sched2 same_pid=
	sched2=$(vs_scheduler node2 "$ip:80")
	[[ -e /proc/$pid && $(tr '\0' ' ' </proc/"$pid"/cmdline) == *"run --config $conf"* ]] && same_pid=ok
	local restarted
	restarted=$(tail -n "+$log_from" "$E2E_LOGS/ipvsproxy-node2.log" | grep -c 'changed; restarting to apply it')
	wait_until 120 proxier_synced node2
	ask c2 "curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://$ip/"
	local code2=$answer

	verdict 40 "--config kubeadm's config.conf: refused for mode iptables; rr and conntrack timeouts applied; unhonoured field named; typo waited out; change restarts in place" \
		config40_ok "$refused_status" "$refused" "$synced" "$sched1" "$timeouts" "$code" "$warning" "$kept" "$sched2" "$same_pid" "$restarted" "$code2"

	# node2's usual daemon again, for the scenarios after this one.
	stop_proxier node2
	start_proxier node2
	wait_until 120 proxier_synced node2
	kc delete-service config40 >/dev/null 2>&1 || true
}

config40_ok() {
	local refused_status=$1 refused=$2 synced=$3 sched1=$4 timeouts=$5 code=$6 warning=$7 kept=$8 sched2=$9 same_pid=${10} restarted=${11} code2=${12}
	((refused_status != 0)) && [[ $refused == *"implements only the ipvs mode"* ]] ||
		{ echo "mode: iptables was not refused clearly: $refused (exit $refused_status)"; return 1; }
	[[ -n $synced ]] || { echo "the daemon started from the file never synced"; return 1; }
	[[ $sched1 == rr ]] || { echo "scheduler from the file: '$sched1', want rr"; return 1; }
	[[ $timeouts == "7200 45 " ]] || { echo "conntrack timeouts: '$timeouts', want 7200 45"; return 1; }
	[[ $code == 200 ]] || { echo "service answered $code"; return 1; }
	[[ $warning == *"winkernel.enableDSR=true"* ]] || { echo "no start-up warning naming winkernel.enableDSR: '$warning'"; return 1; }
	[[ $warning != *"ipvs."* && $warning != *"conntrack."* ]] || { echo "the warning names a field that is honoured: $warning"; return 1; }
	[[ -n $kept ]] || { echo "a broken edit disturbed the running daemon"; return 1; }
	[[ $sched2 == wrr ]] || { echo "after the change the scheduler is '$sched2', want wrr"; return 1; }
	[[ -n $same_pid ]] || { echo "the daemon did not restart in place (pid changed or gone)"; return 1; }
	((restarted == 1)) || { echo "restarts logged: $restarted, want 1"; return 1; }
	[[ $code2 == 200 ]] || { echo "service answered $code2 after the restart"; return 1; }
}
