#!/usr/bin/env bash
# guest.sh — the scenarios of issue 4, run as root inside the VM by e2e/run.sh (never on a host:
# it builds network namespaces and starts daemons). Prints one PASS/FAIL line per scenario with
# the commands it ran and what they answered, then `N passed, N failed`; exits 1 on any failure.
# With E2E_DEMO=1 it prints the seeds' transcript instead: each command, then its answer.
#
# Environment (set by run.sh): E2E_BIN (e2ectl), ECHOSERVER, ADMIN_KUBECONFIG, PROXIER_KUBECONFIG,
# E2E_PKI, E2E_LOGS (a writable directory the host keeps), E2E_HOST_ADDR (the API server's
# address as the guest sees it), E2E_DEMO, E2E_SCENARIOS (optional: which scenarios, in order).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
[[ $(id -u) == 0 && -n ${E2E_HOST_ADDR:-} ]] || { echo "guest.sh runs inside the VM (e2e/run.sh)" >&2; exit 2; }
export ECHOSERVER PATH=$repo/bin:$PATH

. "$here/lib.sh"
. "$here/setup.sh"
# Set by earlier scenarios, read by later ones.
cluster_ip= spread_ip= udp_ip= hc_port=
for f in "$here"/[0-9][0-9]-*.sh; do
	. "$f"
done

finish() {
	if [[ -n ${setup_failed:-} ]]; then
		echo "===== state of the nodes after the failed setup"
		dump_node node1
		dump_node node2
		echo "----- topology logs"
		tail -n 5 /run/e2e-topology/*.log 2>/dev/null
	fi
	stop_proxier node1
	stop_proxier node2
	"$topo" down >/dev/null 2>&1
}
trap finish EXIT

t0=$SECONDS
if ! why=$(setup_cluster 2>&1); then
	setup_failed=1
	echo "FAIL 0 setup: $why"
	echo "0 passed, 1 failed"
	exit 1
fi
echo "setup: topology, 5 pods' servers and two proxiers ready in $((SECONDS - t0))s"
if ((demo)); then
	heading "The cluster: two nodes, each running ipvsproxy; a client outside"
	show - "e2ectl create-nodes  # kubectl get nodes" "$(kc create-nodes)"
	note "pods: $(awk 'NF { printf "%s%s %s on %s", sep, $1, $3, $2; sep = ", " }' <<<"$pods")"
	note "client $client_addr is outside the cluster; the load balancer's VIP is $vip"
	asked=()
fi

# Every scenario_N defined by the files above, in number order, except that 9 (restart) and 10
# (cleanup) end the run: they stop the proxiers. E2E_SCENARIOS="11 12" runs only those, for a
# quick loop while writing one (scenarios from 11 on set up the Services they use themselves).
mapfile -t order < <(declare -F | awk '{ print $3 }' | sed -n 's/^scenario_\([0-9]*\)$/\1/p' | sort -n |
	awk '$1 == 9 || $1 == 10 { last = last " " $1; next } { print } END { n = split(last, a, " "); for (i = 1; i <= n; i++) print a[i] }')
if [[ -n ${E2E_SCENARIOS:-} ]]; then
	read -r -a order <<<"$E2E_SCENARIOS"
	echo "scenarios selected by E2E_SCENARIOS: ${order[*]}"
fi
for n in "${order[@]}"; do
	t=$SECONDS
	"scenario_$n"
	((demo)) || echo "    (${n}: $((SECONDS - t))s)"
done
echo "scenarios took $((SECONDS - t0))s"
finish
trap - EXIT
echo "$passed passed, $failed failed"
((failed == 0))
