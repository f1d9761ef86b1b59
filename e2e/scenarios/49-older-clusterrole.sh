# 49-older-clusterrole.sh — node2 run under a ClusterRole written for an earlier version: the
# deploy/base role without its servicecidrs row (the ServiceCIDR informer is optional), then one
# without its endpointslices row (required). With the first, node2 must still sync and serve: the
# 403 is "ServiceCIDRs not served" (cluster IPs bound one by one on kube-ipvs0), named by a start-up
# line, a Warning Event on the Node and ipvsproxy_api_permission_missing. (Before, one forbidden
# optional list kept the daemon in "Waiting for informers" for ever: no Service on the node.) With
# the second, /readyz and /healthz must name the failing list within seconds. node2 then returns to
# the suite's role.

# older49_role NAME DROPPED_RESOURCE: a ClusterRole NAME with deploy/base's rows but the one for
# DROPPED_RESOURCE, bound to the ServiceAccount kube-system/NAME; prints the directory.
older49_role() {
	local name=$1 dropped=$2 dir=$E2E_LOGS/rbac49-$1
	mkdir -p "$dir"
	awk -v drop="$dropped" '
		/^  - apiGroups:/ { if (row != "" && row !~ ("\"" drop "\"")) printf "%s", row; row = $0 "\n"; next }
		row != "" { row = row $0 "\n"; next }
		{ print }
		END { if (row !~ ("\"" drop "\"")) printf "%s", row }' "$repo/deploy/base/clusterrole.yaml" |
		sed "s/^  name: ipvsproxy\$/  name: $name/" >"$dir/clusterrole.yaml"
	cat >"$dir/clusterrolebinding.yaml" <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: $name}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: $name}
subjects: [{kind: ServiceAccount, name: $name, namespace: kube-system}]
YAML
	echo "$dir"
}

# older49_kubeconfig NAME DROPPED_RESOURCE: applies older49_role and writes a kubeconfig for its
# ServiceAccount; prints the file.
older49_kubeconfig() {
	local dir out=$E2E_LOGS/$1.kubeconfig
	dir=$(older49_role "$1" "$2")
	kc apply-rbac --dir "$dir" --account "kube-system/$1" >/dev/null &&
		kc proxier-kubeconfig --account "kube-system/$1" --out "$out" &&
		echo "$out"
}

# node49_events: the APIPermissionMissing Events on Node node2, one message a line.
node49_events() {
	curl -sS --fail --max-time 20 --cacert "$E2E_PKI/ca.crt" --cert "$E2E_PKI/admin.crt" --key "$E2E_PKI/admin.key" \
		"https://$E2E_HOST_ADDR:6443/api/v1/events?fieldSelector=involvedObject.name=node2,reason=APIPermissionMissing" |
		grep -o '"message": *"[^"]*"' | sort -u
}
export -f node49_events
export E2E_PKI E2E_HOST_ADDR

# health49 PATH: node2's health endpoint from node2, "CODE BODY" on one line.
health49() {
	ip netns exec node2 curl -s --max-time 3 -w ' %{http_code}' "http://127.0.0.1:10256$1" | tr '\n' ' '
}

scenario_49() {
	heading "An older ClusterRole: an optional list forbidden is served around; a required one is named on the health endpoints"
	local info ip no_cidrs no_slices fail=()
	no_cidrs=$(older49_kubeconfig ipvsproxy-older servicecidrs) &&
		no_slices=$(older49_kubeconfig ipvsproxy-no-slices endpointslices) ||
		{ verdict 49 "older ClusterRole: RBAC objects or kubeconfigs" false; return; }
	show - "e2ectl apply-rbac --dir rbac49-ipvsproxy-older  # deploy/base's ClusterRole without the servicecidrs row" \
		"$(oneline "$(grep -c 'apiGroups' "$E2E_LOGS/rbac49-ipvsproxy-older/clusterrole.yaml") rows: $(grep -o 'resources: \[[^]]*\]' "$E2E_LOGS/rbac49-ipvsproxy-older/clusterrole.yaml")")"
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: rbac49}
spec:
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
YAML
) || { verdict 49 "older ClusterRole: Service" false; return; }
	ip=$(field CLUSTER_IP "$info")
	kc set-endpoints rbac49 "$(pod_ip web)@node1" >/dev/null || { verdict 49 "older ClusterRole: endpoints" false; return; }

	# The optional list forbidden: node2 syncs and serves, and says what it lacks.
	stop_proxier node2
	local t0
	t0=$(now)
	PROXIER_KUBECONFIG=$no_cidrs start_proxier node2
	local synced=no
	wait_until 120 proxier_synced node2 && synced="after $(since "$t0") s"
	show node2 "ipvsproxy run --kubeconfig ipvsproxy-older.kubeconfig ...  # first full sync" "$synced"
	[[ $synced == after* ]] || fail+=("node2 never synced under the role without servicecidrs")
	local answer
	answer=$(ip netns exec c2 curl -s --max-time 5 "http://$ip/" | grep '^hostname=')
	show c2 "curl http://$ip/ | grep hostname" "$answer"
	[[ $answer == hostname=web ]] || fail+=("c2 through node2 got '$answer', want hostname=web")
	local bound
	bound=$(ip -n node2 -o addr show dev kube-ipvs0 | grep -c " $ip/32 " || true)
	show node2 "ip addr show kube-ipvs0 | grep $ip  # without ServiceCIDRs each cluster IP is bound" "$bound"
	((bound == 1)) || fail+=("the cluster IP $ip is not bound on node2's kube-ipvs0")
	local missing
	missing=$(metric node2 ipvsproxy_api_permission_missing)
	show node2 "curl 127.0.0.1:10249/metrics | grep ipvsproxy_api_permission_missing" "${missing:-<nothing>}"
	[[ $missing == 1 ]] || fail+=("ipvsproxy_api_permission_missing is '${missing}', want 1 (servicecidrs)")
	local events=
	wait_until 30 bash -c "node49_events | grep -q servicecidrs" && events=$(node49_events)
	show - "curl /api/v1/events?fieldSelector=involvedObject.name=node2,reason=APIPermissionMissing" "$(oneline "${events:-<none>}")"
	[[ $events == *servicecidrs* ]] || fail+=("no APIPermissionMissing Event on Node node2 naming servicecidrs")
	local logged
	logged=$(grep -c 'missingRule=.*servicecidrs' "$E2E_LOGS/ipvsproxy-node2.log" || true)
	show node2 "grep -c 'missingRule=.*servicecidrs' ipvsproxy-node2.log" "$logged"
	((logged >= 1)) || fail+=("no log line names the missing servicecidrs rule")

	# A required list forbidden: the health endpoints name it within seconds.
	stop_proxier node2
	t0=$(now)
	PROXIER_KUBECONFIG=$no_slices start_proxier node2
	local named=no
	wait_until 30 bash -c "ip netns exec node2 curl -s --max-time 2 http://127.0.0.1:10256/readyz | grep -q endpointslices" &&
		named="after $(since "$t0") s"
	local readyz healthz
	readyz=$(health49 /readyz)
	healthz=$(health49 /healthz)
	show node2 "curl 127.0.0.1:10256/readyz; curl 127.0.0.1:10256/healthz  # role without endpointslices" \
		"named $named; readyz: $(cut -c1-160 <<<"$readyz"); healthz: $(cut -c1-160 <<<"$healthz")"
	[[ $named == after* ]] || fail+=("/readyz did not name endpointslices within 30 s")
	[[ $readyz == *endpointslices*' 503' ]] || fail+=("/readyz is not 503 naming endpointslices: $readyz")
	[[ $healthz == *endpointslices*' 503' ]] || fail+=("/healthz is not 503 naming endpointslices: $healthz")

	stop_proxier node2
	start_proxier node2
	wait_until 120 proxier_synced node2 || fail+=("node2 did not sync again under the suite's role")
	kc delete-service rbac49 >/dev/null
	verdict 49 "older ClusterRole: without servicecidrs node2 synced ($synced) and served $ip, bound on kube-ipvs0, with a metric, an Event and a log line; without endpointslices /readyz and /healthz named it ($named)" \
		no_failures "${fail[@]}"
}
