#!/usr/bin/env bash
# Starts the end-to-end control plane on this host's loopback: etcd and
# kube-apiserver (secure port 6443) with fresh certificates, then gives the
# proxier its identity from deploy/base (ServiceAccount kube-system/ipvsproxy,
# its ClusterRole and binding, a TokenRequest token).
#
# Usage: start.sh [WORKDIR]     (WORKDIR must be new or empty; default: a fresh dir under
#                               /var/tmp, which the VM guest sees, unlike /tmp)
# Prints progress and times on stderr and, last on stdout, WORKDIR=<dir>.
# The work dir then holds:
#   admin.kubeconfig          cluster-admin (client certificate), server https://127.0.0.1:6443
#   admin-guest.kubeconfig    cluster-admin, server $GUEST_SERVER (the VM guest's view of the host)
#   proxier.kubeconfig        the proxier's token, server $PROXIER_SERVER
#   proxier-host.kubeconfig   the same identity, server https://127.0.0.1:6443
#   env                       shell variables (E2E_BIN, KUBECONFIG paths) to source
#   pki/ etcd/ logs/          certificates, etcd data, etcd.log and kube-apiserver.log
# Stop with stop.sh WORKDIR, which also removes it.
#
# Env: IPVSPROXY_E2E_BIN      directory with kube-apiserver, etcd, e2ectl (default: run build.sh)
#      APISERVER_PORT         6443
#      ETCD_CLIENT_PORT       2379;  ETCD_PEER_PORT 2380
#      GUEST_SERVER           https://192.0.2.100:6443 (qemu guestfwd to the host's 127.0.0.1:6443)
#      PROXIER_SERVER         $GUEST_SERVER: the server of proxier.kubeconfig (e2e/run.sh: a VIP in
#                             front of the API server, e2e/topology/topology.sh); its host is in the
#                             serving certificate too
#      ADVERTISE_ADDRESS      127.0.0.1, with no endpoint reconciler (default/kubernetes has no
#                             endpoints); an address set here is advertised and written as
#                             default/kubernetes's endpoint by the API server's lease reconciler
#      SERVICE_CIDR           10.96.0.0/16
#      RBAC_DIR               <repo>/deploy/base
#      READY_TIMEOUT          300 (seconds)
#      ETCD_DATA_FROM         a tar of another control plane's etcd data directory (etcd/ at its
#                             top, taken while that etcd was stopped): this one starts holding
#                             that cluster's objects, e.g. 50,000 Services, which take the API
#                             server over an hour to create (docs/performance.md)
#      APISERVER_EXTRA_ARGS   flags appended to kube-apiserver's (a later flag wins), e.g.
#                             --profiling=true to read where the API server's time goes
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
apiserver_port=${APISERVER_PORT:-6443}
etcd_client_port=${ETCD_CLIENT_PORT:-2379}
etcd_peer_port=${ETCD_PEER_PORT:-2380}
guest_server=${GUEST_SERVER:-https://192.0.2.100:6443}
proxier_server=${PROXIER_SERVER:-$guest_server}
advertise_address=${ADVERTISE_ADDRESS:-}
service_cidr=${SERVICE_CIDR:-10.96.0.0/16}
rbac_dir=${RBAC_DIR:-$repo/deploy/base}
ready_timeout=${READY_TIMEOUT:-300}
# The host part of GUEST_SERVER goes into the serving certificate's SANs.
guest_host_ip=${guest_server#*://}
guest_host_ip=${guest_host_ip%%/*}
guest_host_ip=${guest_host_ip%:*}
guest_host_ip=${guest_host_ip#[}
guest_host_ip=${guest_host_ip%]}
proxier_host_ip=${proxier_server#*://}
proxier_host_ip=${proxier_host_ip%%/*}
proxier_host_ip=${proxier_host_ip%:*}
proxier_host_ip=${proxier_host_ip#[}
proxier_host_ip=${proxier_host_ip%]}
if [[ -n $advertise_address ]]; then
	endpoints=(--advertise-address="$advertise_address" --endpoint-reconciler-type=lease)
else
	endpoints=(--advertise-address=127.0.0.1 --endpoint-reconciler-type=none)
fi

log() { echo "start.sh: $*" >&2; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }
die() { log "FAILED: $*"; exit 1; }

t0=$(now)
bin=${IPVSPROXY_E2E_BIN:-$("$here/build.sh")}
for b in kube-apiserver etcd e2ectl; do
	[[ -x $bin/$b ]] || die "$bin/$b missing: run build.sh or set IPVSPROXY_E2E_BIN"
done

# Not under /tmp: the VM guest mounts a fresh tmpfs there, while it sees
# /var/tmp through its read-only share of this machine's root.
work=${1:-$(mktemp -d /var/tmp/ipvsproxy-e2e-cp.XXXXXX)}
mkdir -p "$work"
[[ -z $(ls -A "$work" 2>/dev/null) ]] || die "$work is not empty"
work=$(cd "$work" && pwd)
# stop.sh removes only a directory carrying this marker.
touch "$work/.ipvsproxy-e2e-controlplane"
mkdir -p "$work/logs" "$work/etcd"
if [[ -n ${ETCD_DATA_FROM:-} ]]; then
	tar -C "$work" -xf "$ETCD_DATA_FROM" etcd || die "could not unpack $ETCD_DATA_FROM"
	log "etcd data from $ETCD_DATA_FROM"
fi
chmod 700 "$work/etcd"

# A port already taken means another control plane (or anything else) is
# listening: fail rather than talk to the wrong server.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in "$apiserver_port" "$etcd_client_port" "$etcd_peer_port"; do
	! port_in_use "$p" || die "127.0.0.1:$p is already in use"
done

# On any failure below, leave nothing running; keep the logs for reading.
cleanup_on_error() {
	local rc=$?
	if ((rc != 0)); then
		for f in "$work"/*.pid; do [[ -e $f ]] && kill "$(cat "$f")" 2>/dev/null || true; done
		for f in "$work"/logs/*.log; do
			[[ -e $f ]] && { log "last lines of $f:"; tail -n 20 "$f" >&2; }
		done
		log "logs kept in $work/logs; remove $work with stop.sh"
	fi
}
trap cleanup_on_error EXIT

"$bin/e2ectl" pki --dir "$work/pki" --ip 127.0.0.1 --ip "$guest_host_ip" --ip "$proxier_host_ip" \
	--ip "$(awk -F'[./]' '{ print $1"."$2"."$3"."$4+1 }' <<<"$service_cidr")" \
	--dns localhost --dns kubernetes --dns kubernetes.default --dns kubernetes.default.svc \
	--dns kubernetes.default.svc.cluster.local
log "certificates in $work/pki"

t_etcd=$(now)
etcd_url=http://127.0.0.1:$etcd_client_port
"$bin/etcd" --name e2e --data-dir "$work/etcd" \
	--listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
	--listen-peer-urls "http://127.0.0.1:$etcd_peer_port" \
	--initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
	--initial-cluster "e2e=http://127.0.0.1:$etcd_peer_port" \
	--unsafe-no-fsync --log-level warn \
	>"$work/logs/etcd.log" 2>&1 &
echo $! >"$work/etcd.pid"
until port_in_use "$etcd_client_port"; do
	kill -0 "$(cat "$work/etcd.pid")" 2>/dev/null || die "etcd exited"
	sleep 0.1
done
log "etcd listening after $(since "$t_etcd")"

t_api=$(now)
pki=$work/pki
# --allow-privileged as kubeadm and most clusters set it: a DaemonSet of
# deploy/ asking for privilege is otherwise refused before RBAC is ever tested.
"$bin/kube-apiserver" \
	--etcd-servers="$etcd_url" \
	--bind-address=127.0.0.1 "${endpoints[@]}" --secure-port="$apiserver_port" \
	--cert-dir="$pki" --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
	--client-ca-file="$pki/ca.crt" \
	--service-account-issuer=https://kubernetes.default.svc.cluster.local \
	--service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
	--authorization-mode=Node,RBAC \
	--allow-privileged=true \
	--service-cluster-ip-range="$service_cidr" \
	--profiling=false \
	${APISERVER_EXTRA_ARGS:-} \
	>"$work/logs/kube-apiserver.log" 2>&1 &
echo $! >"$work/kube-apiserver.pid"

"$bin/e2ectl" admin-kubeconfig --pki "$pki" --server "https://127.0.0.1:$apiserver_port" --out "$work/admin.kubeconfig"
"$bin/e2ectl" admin-kubeconfig --pki "$pki" --server "$guest_server" --out "$work/admin-guest.kubeconfig"
export KUBECONFIG=$work/admin.kubeconfig
deadline=$(($(date +%s) + ready_timeout))
until "$bin/e2ectl" wait-ready --timeout 5s >/dev/null 2>&1; do
	kill -0 "$(cat "$work/kube-apiserver.pid")" 2>/dev/null || die "kube-apiserver exited"
	(($(date +%s) < deadline)) || die "kube-apiserver not ready within ${ready_timeout}s"
done
log "kube-apiserver ready (/readyz ok) after $(since "$t_api")"

t_id=$(now)
"$bin/e2ectl" apply-rbac --dir "$rbac_dir" >&2
"$bin/e2ectl" proxier-kubeconfig --server "$proxier_server" --out "$work/proxier.kubeconfig"
"$bin/e2ectl" proxier-kubeconfig --server "https://127.0.0.1:$apiserver_port" --out "$work/proxier-host.kubeconfig"
log "proxier identity from $rbac_dir ready after $(since "$t_id")"

cat >"$work/env" <<ENV
E2E_BIN=$bin
E2E_WORKDIR=$work
ADMIN_KUBECONFIG=$work/admin.kubeconfig
ADMIN_GUEST_KUBECONFIG=$work/admin-guest.kubeconfig
PROXIER_KUBECONFIG=$work/proxier.kubeconfig
PROXIER_HOST_KUBECONFIG=$work/proxier-host.kubeconfig
ENV
log "control plane up in $(since "$t0") total; source $work/env; stop with $here/stop.sh $work"
echo "WORKDIR=$work"
