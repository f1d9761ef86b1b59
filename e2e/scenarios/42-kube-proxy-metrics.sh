# 42-kube-proxy-metrics.sh — the metrics issue 11 adds, as a scraper sees them on a node:
# kube-proxy's full and partial sync histograms, kubernetes_build_info, client-go's
# rest_client_* (the proxy's own requests to the API server), and the conntrack reconciler's
# series once a UDP endpoint went away.

scenario_42() {
	heading "kube-proxy's metrics on /metrics"
	# A change, so that a partial sync has happened whatever ran before.
	local info ip
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: metrics42}
spec:
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
YAML
) || { verdict 42 "kube-proxy's metrics" false; return; }
	ip=$(field CLUSTER_IP "$info")
	kc set-endpoints metrics42 "$(pod_ip web)@node1" || { verdict 42 "kube-proxy's metrics" false; return; }
	wait_real_servers node1 tcp "$ip:80" "$(pod_ip web):8080"
	sleep 1
	ask node1 "curl -s localhost:10249/metrics | grep -E '^(kubernetes_build_info|kubeproxy_sync_full_proxy_rules_duration_seconds_count|kubeproxy_sync_partial_proxy_rules_duration_seconds_count|rest_client_requests_total)' | sort | head -n 12"
	local m=$answer
	verdict 42 "kube-proxy's metrics: build info, full and partial sync histograms, rest_client_requests_total" \
		metrics42_ok "$m"
	kc delete-service metrics42 >/dev/null 2>&1 || true
}

metrics42_ok() {
	local m=$1 name
	for name in kubernetes_build_info 'kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv4"}' \
		'kubeproxy_sync_partial_proxy_rules_duration_seconds_count{ip_family="IPv4"}' 'rest_client_requests_total{code="200"'; do
		grep -qF "$name" <<<"$m" || { echo "no $name in /metrics"; return 1; }
	done
	awk '$1 ~ /^kubeproxy_sync_full_proxy_rules_duration_seconds_count/ && $2 >= 1 { ok = 1 } END { exit !ok }' <<<"$m" ||
		{ echo "no full sync observed"; return 1; }
}
