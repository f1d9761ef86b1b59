#!/usr/bin/env bash
# run.sh — the seed tutorial ("Using Source IP") as an end-to-end test: a real kube-apiserver on
# this machine's loopback, one VM (the host kernel has no IPVS) with two nodes in network
# namespaces, one `ipvsproxy run` per node, and the scenarios: bash ones in
# e2e/scenarios/, Go ones in e2e/suite/ (built here as a test binary), run in one boot.
#
#   e2e/run.sh            `PASS name: ...`/`FAIL name: ...` per verdict, last line `N passed, N failed`;
#                         exit 1 on failure
#   e2e/run.sh --demo     the tutorial's scenarios only (demo_scenarios below), printed for a person:
#                         seed by seed, each command and its answer
#
# Host side (this file): build the control plane (cached) and the echo server, start the control
# plane, boot the VM with a restricted user NIC whose only way out is a guestfwd to the API
# server's 127.0.0.1:6443, run e2e/scenarios/guest.sh as root in it, then stop everything (trap).
# Needs root, bin/ipvsproxy (`make build`; built here when missing) and Go.
#
# Environment:
#   IPVSPROXY_E2E_CACHE    cache root (default /var/cache/ipvsproxy-e2e): VM kernel, control-plane
#                          binaries, and this run's work dir (the guest mounts its own /tmp, so
#                          everything it reads lives under the cache, not /tmp)
#   IPVSPROXY_E2E_KEEP=1   keep the work dir (control-plane logs, proxier logs) after the run
#   IPVSPROXY_VM_TIMEOUT   hard limit for the VM (default 2400 s: the suite has grown to about 60 scenarios)
#   IPVSPROXY_E2E_PROXIER_ARGS  extra `ipvsproxy run` flags (e.g. --ipvs-scheduler=rr, which
#                          tutorial-proxy-mode must then reject: a way to see the suite fail)
#   IPVSPROXY_E2E_SCENARIOS    run only these scenarios, by name (docs/testing.md), e.g.
#                          "local-policy-no-endpoints sctp" (default: all but those run by name
#                          only); a verdict's name runs its scenario; checked before the VM boots
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cache=${IPVSPROXY_E2E_CACHE:-/var/cache/ipvsproxy-e2e}
go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
demo=0
case ${1:-} in
--demo) demo=1 ;;
"") ;;
*) echo "usage: $0 [--demo]" >&2; exit 2 ;;
esac

# The demo (`make demo`) is a first look, not the suite: the seeds' tutorial on two nodes —
# a ClusterIP Service, a NodePort one made Local, a LoadBalancer one made Local with its
# health-check node port, /proxyMode — and `ipvsproxy inspect`, `inspect --check` and
# `inspect trace` (the scenario inspect). IPVSPROXY_E2E_SCENARIOS overrides it.
demo_scenarios="tutorial-clusterip tutorial-nodeport tutorial-loadbalancer tutorial-proxy-mode inspect"
if ((demo)) && [[ -z ${IPVSPROXY_E2E_SCENARIOS:-} ]]; then
	IPVSPROXY_E2E_SCENARIOS=$demo_scenarios
fi

say() { printf 'e2e: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
[[ $(id -u) == 0 ]] || die "run as root (the VM shares / and the scenarios need netns)"

# Up to three runs at a time on a machine, each in its own slot of host ports for the control
# plane (slot 0: 6443, 2379, 2380; slot N adds 100*N). The guest always sees 192.0.2.100:6443.
# A fourth run waits for a slot instead of failing on a busy port.
slot=
while [[ -z $slot ]]; do
	for s in 0 1 2; do
		exec 8>"/var/lock/ipvsproxy-e2e-slot-$s.lock"
		if flock -n 8; then slot=$s; break; fi
		exec 8>&-
	done
	if [[ -z $slot ]]; then
		say "three e2e runs in progress; waiting for a slot"
		sleep 10
	fi
done
export APISERVER_PORT=$((6443 + 100 * slot)) ETCD_CLIENT_PORT=$((2379 + 100 * slot)) ETCD_PEER_PORT=$((2380 + 100 * slot))
t_all=$SECONDS
mkdir -p "$cache/e2e"
work=$(mktemp -d "$cache/e2e/run.XXXXXX")
cp_dir=$work/controlplane
cp_started=

cleanup() {
	local rc=$?
	if [[ -n $cp_started && -e $cp_dir/.ipvsproxy-e2e-controlplane ]]; then
		if ((rc != 0)) || [[ -n ${IPVSPROXY_E2E_KEEP:-} ]]; then
			# stop.sh removes its dir: keep the API server's log for reading first.
			cp -r "$cp_dir/logs" "$work/controlplane-logs" 2>/dev/null || true
		fi
		"$repo/e2e/controlplane/stop.sh" "$cp_dir" 2>/dev/null || true
	fi
	if ((rc != 0)) || [[ -n ${IPVSPROXY_E2E_KEEP:-} ]]; then
		[[ -n ${summary:-} ]] || say "logs kept in $work"
	else
		rm -rf -- "$work"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 1. Binaries. The control plane is cached by build.sh; e2ectl is rebuilt each time (seconds).
t=$SECONDS
cp_bin=$("$repo/e2e/controlplane/build.sh")
t_build=$((SECONDS - t))
say "control plane binaries in $cp_bin (${t_build}s)"
if [[ ! -x $repo/bin/ipvsproxy ]]; then
	say "bin/ipvsproxy missing: make build"
	make -C "$repo" build >&2
fi
(cd "$repo" && CGO_ENABLED=0 "$go" build -trimpath -o "$work/echoserver" ./e2e/echoserver)
# The Go scenarios (e2e/suite, a module of its own), one test binary the guest runs after its setup.
(cd "$repo/e2e/suite" && CGO_ENABLED=0 "$go" test -c -tags e2e -trimpath -o "$work/e2e-suite.test" .)
# A selection becomes the scenarios it runs, in its order, before anything boots: a name no
# verdict has ends the run here, a former name is taken with a note.
if [[ -n ${IPVSPROXY_E2E_SCENARIOS:-} ]]; then
	resolved=$("$work/e2e-suite.test" -resolve "$IPVSPROXY_E2E_SCENARIOS") ||
		die "IPVSPROXY_E2E_SCENARIOS=\"$IPVSPROXY_E2E_SCENARIOS\": docs/testing.md names every scenario"
	IPVSPROXY_E2E_SCENARIOS=$resolved
fi
# What carries out the migration guide's `kubectl apply -k` in its scenario (no kubectl here); the
# deploy check below compiles the same package, so this is a link. The demo runs no such scenario.
deploy_apply=
if ((!demo)); then
	(cd "$repo" && CGO_ENABLED=0 "$go" build -trimpath -o "$work/deploy-apply" ./deploy/test/apply)
	deploy_apply=$work/deploy-apply
fi
# This run's own e2ectl, beside links to the cached control plane: the cache is shared by every
# checkout on the machine, and a run from another branch rebuilt the cached e2ectl under a running
# one ("unknown command create-servicecidr").
run_bin=$work/bin
mkdir -p "$run_bin"
for f in "$cp_bin"/*; do
	[[ $(basename "$f") == e2ectl ]] || ln -s "$f" "$run_bin/"
done
(cd "$repo/e2e/controlplane" && CGO_ENABLED=0 "$go" build -trimpath -buildvcs=false -o "$run_bin/e2ectl" ./cmd/e2ectl)
cp_bin=$run_bin
# The previous release's build, for upgrade-downgrade when it runs.
previous=
if [[ -z ${IPVSPROXY_E2E_SCENARIOS:-} || " $IPVSPROXY_E2E_SCENARIOS " == *" upgrade-downgrade "* ]]; then
	t=$SECONDS
	previous=$("$repo/e2e/previous-build.sh") || die "the previous release's build failed (e2e/previous-build.sh)"
	say "previous release's build $previous ($((SECONDS - t))s)"
fi

# The release's image: `make image`'s archive, made again unless its linux/amd64 daemon is
# bin/ipvsproxy, the binary every scenario runs; and the release's manifests and chart rendered
# from it, which the deploy check below applies.
image_dir=$repo/_output/image
image_current() {
	local archive
	archive=$(ls "$image_dir"/ipvsproxy-*.oci.tar 2>/dev/null) && [[ -x $image_dir/ipvsproxy-release ]] &&
		"$image_dir/ipvsproxy-release" extract -archive "$archive" -platform linux/amd64 -o "$work/image-ipvsproxy" 2>/dev/null &&
		cmp -s "$work/image-ipvsproxy" "$repo/bin/ipvsproxy"
}
# The demo applies no manifests, so it needs no image.
t=$SECONDS
if ((!demo)); then
	# One build at a time: `make e2e`'s two halves start together, and two builds writing the same
	# _output/image leave each other a truncated rootfs.tar.
	mkdir -p "$repo/_output"
	exec {image_lock}>"$repo/_output/image.lock"
	flock "$image_lock"
	if ! image_current; then
		say "make image: no archive whose daemon is bin/ipvsproxy"
		make -C "$repo" --no-print-directory image IMAGE_REUSE=1 >&2
		image_current || die "make image's linux/amd64 daemon is not bin/ipvsproxy (run make build image)"
	fi
	"$image_dir/ipvsproxy-release" release -archive "$(ls "$image_dir"/ipvsproxy-*.oci.tar)" -repo "$repo" -o "$work/release" >/dev/null
	exec {image_lock}>&-
	say "image $(cat "$work/release/IMAGE"), its daemon bin/ipvsproxy; release rendered ($((SECONDS - t))s)"
fi

# 2. The VM's kernel and initramfs (cached; about 2 s when nothing changed).
t=$SECONDS
"$repo/e2e/vm/prepare.sh" >/dev/null
say "VM prepared ($((SECONDS - t))s)"

# 3. The control plane, on 127.0.0.1:$APISERVER_PORT.
t=$SECONDS
cp_started=1
# A dual-stack Service range (IPv4 first, so a Service without ipFamilies stays IPv4). The API
# server advertises the address the guest reaches it at, so default/kubernetes names it, while
# the proxiers dial it through a VIP that is no endpoint of default/kubernetes, as nodes of an HA
# cluster dial a load balancer (the VM's root namespace DNATs it, e2e/topology/topology.sh).
api_vip=192.0.2.253
IPVSPROXY_E2E_BIN=$cp_bin SERVICE_CIDR=10.96.0.0/16,2001:db8:96::/112 ADVERTISE_ADDRESS=192.0.2.100 \
	PROXIER_SERVER=https://$api_vip:6443 \
	"$repo/e2e/controlplane/start.sh" "$cp_dir" >/dev/null 2>"$work/controlplane-start.log" || {
	cat "$work/controlplane-start.log" >&2
	die "control plane did not start"
}
t_cp=$((SECONDS - t))
say "control plane up (${t_cp}s)"
# The DaemonSet's manifests, server-side applied to this real API server with strict
# field validation (any schema error fails), and the ServiceAccount's access checked against
# docs/rbac.md. Counted as one more test in the summary; the demo leaves it out.
if ((demo)); then
	deploy_ok=
elif RELEASE_DIR=$work/release "$repo/deploy/test/apply.sh" "$cp_dir/admin.kubeconfig" >"$work/deploy-apply.log" 2>&1; then
	deploy_ok=1
	echo "PASS deploy: kustomized manifests, the Helm chart and the release's manifests and packaged chart (every container on $(sed 's/.*@//' "$work/release/IMAGE")) server-side applied; RBAC allows exactly docs/rbac.md"
else
	deploy_ok=0
	echo "FAIL deploy: applying deploy/ to the API server failed:"
	sed 's/^/    /' "$work/deploy-apply.log"
fi
# The guest's admin identity: same certificate, the API server as the guest sees it (guestfwd).
"$cp_bin/e2ectl" admin-kubeconfig --pki "$cp_dir/pki" --server https://192.0.2.100:6443 \
	--out "$work/admin-guest.kubeconfig"

# 4. One VM boot for every scenario. The guest writes its proxier logs into the results share.
# Its `N passed, N failed` line is held back and printed last, after the times.
mkdir -p "$work/results"
summary_re='^[0-9]+ passed, [0-9]+ failed$'
t=$SECONDS
set +e
IPVSPROXY_VM_PREPARED=1 "$repo/e2e/vm/run.sh" \
	--timeout "${IPVSPROXY_VM_TIMEOUT:-2400}" --results "$work/results" --host-port "6443:$APISERVER_PORT" \
	-e "E2E_BIN=$cp_bin" -e "ECHOSERVER=$work/echoserver" -e "E2E_DEMO=$demo" \
	-e "E2E_SUITE=$work/e2e-suite.test" -e "E2E_APPLY=$deploy_apply" \
	-e "E2E_LOGS=$work/results/logs" -e "E2E_PKI=$cp_dir/pki" \
	-e "E2E_PROXIER_ARGS=${IPVSPROXY_E2E_PROXIER_ARGS:-}" -e "E2E_API_VIP=$api_vip" \
	-e "E2E_SCENARIOS=${IPVSPROXY_E2E_SCENARIOS:-}" -e "E2E_PREVIOUS_IPVSPROXY=$previous" \
	-e "ADMIN_KUBECONFIG=$work/admin-guest.kubeconfig" \
	-e "PROXIER_KUBECONFIG=$cp_dir/proxier.kubeconfig" \
	-- "$repo/e2e/scenarios/guest.sh" | tee "$work/output.log" | grep --line-buffered -Ev "$summary_re"
rc=${PIPESTATUS[0]}
set -e
t_vm=$((SECONDS - t))
boot=$(sed -n 's/^vm: guest ready after \([0-9.]*\)s.*/\1/p' "$work/output.log")
say "times: control-plane build ${t_build}s, control-plane start ${t_cp}s, VM boot ${boot:-?}s, VM run ${t_vm}s (boot and scenarios), whole $((SECONDS - t_all))s"
summary=$(grep -E "$summary_re" "$work/output.log" | tail -n1 || true)
if [[ -z $summary ]]; then
	# The guest never finished: count what it printed, plus the run itself as a failure.
	# grep -c exits 1 when it counts 0; under set -e that would end the script here.
	n_pass=$(grep -c '^PASS ' "$work/output.log" || true)
	n_fail=$(grep -c '^FAIL ' "$work/output.log" || true)
	summary="$n_pass passed, $((n_fail + 1)) failed"
	if [[ -f $work/results/guest-panic ]]; then
		echo "FAIL guest kernel panic (the VM died; its oops is above): $(sed -E 's/^\[ *[0-9.]+\] //; q' "$work/results/guest-panic")"
	fi
	((rc != 0)) || rc=1
fi
read -r passed _ failed _ <<<"$summary"
if [[ $deploy_ok == 1 ]]; then
	passed=$((passed + 1))
elif [[ $deploy_ok == 0 ]]; then
	failed=$((failed + 1)) rc=1
fi
summary="$passed passed, $failed failed"
if ((rc != 0)) || [[ -n ${IPVSPROXY_E2E_KEEP:-} ]]; then
	say "logs kept in $work (output.log, results/logs/, controlplane-logs/)"
fi
echo "$summary"
exit "$rc"
