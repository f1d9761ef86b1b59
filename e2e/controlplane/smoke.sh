#!/usr/bin/env bash
# Proves the end-to-end control plane on this host: starts it, registers the
# nodes, creates Services of each type (the API server allocates cluster IPs,
# node ports and the health-check node port) and EndpointSlices, reads them
# back with the proxier's token, checks that its RBAC allows exactly what the
# proxier needs, and stops it. Exits non-zero on any failure and ends with
# "N passed, N failed".
#
# Env: as start.sh (IPVSPROXY_E2E_BIN to skip build.sh, ports, RBAC_DIR).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
passed=0 failed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
finish() {
	echo "$passed passed, $failed failed"
	((failed == 0))
	exit
}

bin=${IPVSPROXY_E2E_BIN:-$("$here/build.sh")} || { fail "build"; finish; }
export IPVSPROXY_E2E_BIN=$bin
out=$("$here/start.sh") || { fail "start the control plane"; finish; }
work=${out##*WORKDIR=}
trap '"$here/stop.sh" "$work"' EXIT
pass "control plane started in $work"
# shellcheck disable=SC1091
source "$work/env"

admin() { "$bin/e2ectl" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }
proxier() { "$bin/e2ectl" --kubeconfig "$PROXIER_HOST_KUBECONFIG" "$@"; }
# check NAME COMMAND...: the command must succeed.
check() {
	local name=$1
	shift
	local output
	if output=$("$@" 2>&1); then pass "$name"; else fail "$name: $output"; fi
}
# expect VALUE-NAME ACTUAL PATTERN: ACTUAL must match the extended regexp.
expect() {
	if [[ $2 =~ $3 ]]; then pass "$1 = $2"; else fail "$1 = '$2', want /$3/"; fi
}

check "create nodes node1 and node2" admin create-nodes

svc_dir=$(mktemp -d)
trap '"$here/stop.sh" "$work"; rm -rf "$svc_dir"' EXIT
for type in ClusterIP NodePort LoadBalancer; do
	name=echo-$(tr A-Z a-z <<<"$type")
	policy=
	[[ $type == LoadBalancer ]] && policy="externalTrafficPolicy: Local"
	cat >"$svc_dir/$name.yaml" <<YAML
apiVersion: v1
kind: Service
metadata: {name: $name, namespace: default}
spec:
  type: $type
  $policy
  selector: {app: echo}
  ports:
  - {name: http, port: 80, targetPort: 8080, protocol: TCP}
  - {name: dns, port: 53, protocol: UDP}
YAML
	if info=$(admin apply-service "$svc_dir/$name.yaml" 2>&1); then
		pass "apply $type service $name"
	else
		fail "apply $type service $name: $info"
		continue
	fi
	declare -A v=()
	while IFS='=' read -r k val; do v[$k]=$val; done <<<"$info"
	expect "$name CLUSTER_IP" "${v[CLUSTER_IP]:-}" '^10\.96\.[0-9]+\.[0-9]+$'
	if [[ $type == ClusterIP ]]; then
		expect "$name NODE_PORT_HTTP" "${v[NODE_PORT_HTTP]:-}" '^0$'
	else
		expect "$name NODE_PORT_HTTP" "${v[NODE_PORT_HTTP]:-}" '^3[0-9]{4}$'
	fi
	if [[ $type == LoadBalancer ]]; then
		expect "$name HEALTH_CHECK_NODE_PORT" "${v[HEALTH_CHECK_NODE_PORT]:-}" '^3[0-9]{4}$'
	else
		expect "$name HEALTH_CHECK_NODE_PORT" "${v[HEALTH_CHECK_NODE_PORT]:-}" '^0$'
	fi
	unset v
done

# Local -> Cluster releases the health-check node port; Cluster -> Local
# allocates one again.
info=$(admin patch-etp echo-loadbalancer Cluster 2>&1)
expect "after patch-etp Cluster, HEALTH_CHECK_NODE_PORT" "$(sed -n 's/^HEALTH_CHECK_NODE_PORT=//p' <<<"$info")" '^0$'
info=$(admin patch-etp echo-loadbalancer Local 2>&1)
expect "after patch-etp Local, HEALTH_CHECK_NODE_PORT" "$(sed -n 's/^HEALTH_CHECK_NODE_PORT=//p' <<<"$info")" '^3[0-9]{4}$'

check "set endpoints of echo-loadbalancer" \
	admin set-endpoints echo-loadbalancer 10.244.1.5@node1 10.244.2.7@node2:terminating fd00:10:244:1::5@node1
check "delete endpoint fd00:10:244:1::5" admin delete-endpoint echo-loadbalancer fd00:10:244:1::5
if admin delete-endpoint echo-loadbalancer 10.244.9.9 >/dev/null 2>&1; then
	fail "deleting an endpoint that does not exist succeeded"
else
	pass "deleting an endpoint that does not exist fails"
fi

# Read back with the proxier's own token, through the API as it will.
kc=$PROXIER_HOST_KUBECONFIG
as_proxier_get() { # PATH: a raw GET with the proxier's token
	curl -sS --fail --cacert "$work/pki/ca.crt" \
		-H "Authorization: Bearer $(sed -n 's/^ *token: //p' "$kc")" "https://127.0.0.1:6443$1"
}
if command -v curl >/dev/null; then
	body=$(as_proxier_get /apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io/service-name=echo-loadbalancer 2>&1)
	expect "proxier reads slice echo-loadbalancer-e2e-ipv4" "$(tr -d ' \n' <<<"$body" | grep -o '"name":"echo-loadbalancer-e2e-ipv4"' | head -1)" 'echo-loadbalancer-e2e-ipv4'
	expect "its endpoint 10.244.2.7 is terminating and serving" \
		"$(tr -d ' \n' <<<"$body" | grep -o '"addresses":\["10.244.2.7"\],"conditions":{[^}]*}' | head -1)" \
		'"ready":false,"serving":true,"terminating":true'
	expect "its endpoint 10.244.1.5 has zone zone-a" "$(tr -d ' \n' <<<"$body" | grep -o '"addresses":\["10.244.1.5"\][^}]*}[^}]*}' | head -1)" '"zone":"zone-a"'
	expect "the IPv6 slice is gone with its only endpoint" "$(grep -c 'e2e-ipv6' <<<"$body")" '^0$'
	body=$(as_proxier_get /api/v1/services 2>&1)
	expect "proxier lists the three echo Services" "$(tr -d ' \n' <<<"$body" | grep -o '"name":"echo-[a-z]*"' | sort -u | tr '\n' ' ')" \
		'^"name":"echo-clusterip" "name":"echo-loadbalancer" "name":"echo-nodeport" $'
	body=$(as_proxier_get /api/v1/nodes/node1 2>&1)
	expect "proxier reads node1's InternalIP" "$(tr -d ' \n' <<<"$body" | grep -o '"type":"InternalIP","address":"[^"]*"')" '198\.51\.100\.1"$'

	# The guest's kubeconfig: its server address (192.0.2.100, reached through
	# qemu's guestfwd) must verify against the serving certificate; here the
	# connection is steered to loopback, as the guestfwd does.
	server=$(sed -n 's/^ *server: //p' "$PROXIER_KUBECONFIG")
	hostport=${server#https://}
	body=$(curl -sS --fail --cacert "$work/pki/ca.crt" --connect-to "$hostport:127.0.0.1:6443" \
		-H "Authorization: Bearer $(sed -n 's/^ *token: //p' "$PROXIER_KUBECONFIG")" "$server/api/v1/nodes" 2>&1)
	expect "proxier.kubeconfig ($server) lists nodes over verified TLS" \
		"$(tr -d ' \n' <<<"$body" | grep -o '"name":"node[12]"' | sort -u | tr '\n' ' ')" '^"name":"node1" "name":"node2" $'
else
	fail "curl missing: cannot read back as the proxier"
fi

for probe in "list services" "watch services" "list endpointslices" "watch endpointslices" \
	"list nodes" "watch nodes" "get nodes" "create events" "patch events"; do
	# shellcheck disable=SC2086
	check "proxier may $probe" proxier access $probe
done
for probe in "create services" "patch services" "delete services" "get services" \
	"create endpointslices" "delete endpointslices" "create nodes" "patch nodes" "delete nodes" \
	"list pods" "watch pods" "list secrets" "watch secrets" "get secrets" "list configmaps" "list serviceaccounts" \
	"list clusterroles" "create clusterrolebindings" \
	"list namespaces" "list events"; do
	# shellcheck disable=SC2086
	out=$(proxier access $probe 2>&1)
	case $? in
	3) pass "proxier may not $probe" ;;
	0) fail "proxier may $probe: $out" ;;
	*) fail "probe $probe: $out" ;;
	esac
done

finish
