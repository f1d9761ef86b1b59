#!/usr/bin/env bash
# guest.sh — the end-to-end scenarios (the Go tests of e2e/suite), run as root inside the VM by
# e2e/run.sh (never on a host: it builds network namespaces and starts daemons). Sets up the
# cluster, then runs the scenarios in order: one line per verdict, `PASS name: what` or
# `FAIL name: what: why`, with the commands it ran and what they answered, then
# `N passed, N failed`; exits 1 on any failure. With E2E_DEMO=1 it prints the seeds' transcript
# instead: each command, then its answer.
#
# Environment (set by run.sh): E2E_BIN (e2ectl), ECHOSERVER, ADMIN_KUBECONFIG, PROXIER_KUBECONFIG,
# E2E_PKI, E2E_LOGS (a writable directory the host keeps), E2E_HOST_ADDR (the API server's
# address as the guest sees it), E2E_API_VIP (the VIP the proxiers dial it at), E2E_DEMO,
# E2E_SCENARIOS (optional: which scenarios, by name, in order; run.sh resolves the selection),
# E2E_SUITE (the Go scenarios of e2e/suite, a `go test -c -tags e2e` binary).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
[[ $(id -u) == 0 && -n ${E2E_HOST_ADDR:-} ]] || { echo "guest.sh runs inside the VM (e2e/run.sh)" >&2; exit 2; }
export ECHOSERVER PATH=$repo/bin:$PATH

. "$here/lib.sh"
. "$here/setup.sh"
# The Go scenarios: go_scenario[VERDICT]=SCENARIO (tutorial-nodeport prints the verdicts
# tutorial-nodeport and tutorial-nodeport-local), and the default order: every scenario in the
# order of the suite's -list but those it marks by-name (rollback-to-kube-proxy-ipvs ...), which
# run only when E2E_SCENARIOS names them, for time. The list ends with restart-under-load and
# cleanup-leaves-nothing: they stop the proxiers.
declare -A go_scenario=()
order=()
[[ -x ${E2E_SUITE:-} ]] || { echo "FAIL setup: E2E_SUITE (the e2e/suite test binary) is not set or not executable"; echo "0 passed, 1 failed"; exit 1; }
while read -r v n how; do
	go_scenario[$v]=$n
	[[ $v != "$n" || $how == by-name ]] || order+=("$n")
done < <("$E2E_SUITE" -list)
((${#order[@]})) || { echo "FAIL setup: $E2E_SUITE -list named no Go scenario"; echo "0 passed, 1 failed"; exit 1; }

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
	echo "FAIL setup: $why"
	echo "0 passed, 1 failed"
	exit 1
fi
echo "setup: topology, 5 pods' servers and two proxiers ready in $((SECONDS - t0))s"
if ((demo)); then
	heading "The cluster: two nodes, each running ipvsproxy; a client outside"
	show - "e2ectl create-nodes  # kubectl get nodes" "$(kc create-nodes)"
	note "pods: $(awk 'NF { printf "%s%s %s on %s", sep, $1, $3, $2; sep = ", " }' <<<"$pods")"
	note "client $client_addr is outside the cluster; the load balancer's VIP is $vip"
fi

# E2E_SCENARIOS="local-policy-no-endpoints external-ip-held-by-node" runs only those, for a quick
# loop while writing one (each scenario sets up the Services it uses itself).
if [[ -n ${E2E_SCENARIOS:-} ]]; then
	read -r -a order <<<"$E2E_SCENARIOS"
	echo "scenarios selected by E2E_SCENARIOS: ${order[*]}"
fi

# run_go SCENARIO...: the Go scenarios in one run of the suite binary; its PASS/FAIL lines are
# counted. A run that exits non-zero without a FAIL line (a panic, a failed clean-up) counts as
# one failure.
run_go() {
	local line rc= fails=0
	while IFS= read -r line; do
		case $line in
		PASS | FAIL) continue ;; # go test's own summary line: the verdicts above say it
		"e2e-suite exit "*) rc=${line#e2e-suite exit }; continue ;;
		"PASS "*) passed=$((passed + 1)) ;;
		"FAIL "*) failed=$((failed + 1)) fails=$((fails + 1)) ;;
		esac
		printf '%s\n' "$line"
	done < <(
		E2E_REPO=$repo "$E2E_SUITE" -test.run '^TestScenarios$' -test.timeout 0 -scenarios "$*" 2>&1
		echo "e2e-suite exit $?"
	)
	if [[ $rc != 0 ]] && ((fails == 0)); then
		failed=$((failed + 1))
		echo "FAIL $1: e2e/suite exited ${rc:-?} without a failed verdict (output above)"
	fi
}

declare -A go_ran=()
# Each scenario's time follows its verdicts, `    (NAME: Ns)`: run-parallel.sh records them in
# e2e/scenarios/durations.tsv to balance its halves.
for n in "${order[@]}"; do
	t=$SECONDS
	if [[ -n ${go_scenario[$n]:-} ]]; then
		n=${go_scenario[$n]}
		[[ -z ${go_ran[$n]:-} ]] || continue
		go_ran[$n]=1
		run_go "$n"
	else
		failed=$((failed + 1))
		echo "FAIL $n: no such scenario in e2e/suite"
	fi
	((demo)) || echo "    (${n}: $((SECONDS - t))s)"
done
echo "scenarios took $((SECONDS - t0))s"
finish
trap - EXIT
echo "$passed passed, $failed failed"
((failed == 0))
