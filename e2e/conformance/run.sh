#!/usr/bin/env bash
# run.sh — Kubernetes' own [sig-network] e2e tests against ipvsproxy installed from deploy/ and
# started by a real kubelet. `make conformance` runs it.
#
# The cluster: a network namespace on this machine holds a bridge (203.0.113.1/24, RFC 5737) with
# etcd, kube-apiserver, kube-controller-manager and kube-scheduler, and one tap per node; each node
# is a qemu guest of e2e/vm/run.sh on its tap (203.0.113.1N) running containerd, runc, bridge +
# host-local CNI and the kubelet (node.sh). No kube-proxy: ipvsproxy is server-side applied from
# deploy/base plus overlay/ and must become Ready on every node, its Node address publisher
# available with every node's addresses published. Then e2e.test runs in the
# namespace; its JUnit report lands in e2e/results/ and the summary line is
# `N passed, N failed, N skipped` with each failure's name.
#
# Usage: run.sh [--smoke] [--shard K/N] [--nodes 1|2] [--focus RE] [--skip RE] [--dual-stack] [--keep]
#   --smoke   the DaemonSet becomes Ready, the publisher publishes every node, and one Service
#             conformance test passes (make test's form)
#   --shard   K/N: the K-th of N shards of the selected specs sorted by name (K,K/N: several);
#             a shard run and a full run append their results to ledger.tsv (docs/conformance.md)
#   --kube-proxy-ipvs  the same cluster with upstream's kube-proxy (the release go.mod requires) in IPVS mode on each
#             node instead of ipvsproxy's DaemonSet: the reference that tells our failures from
#             the test bed's (ledger cluster kube-proxy-ipvs)
#   --dual-stack  the same cluster with both families (CONF_CLUSTER=dual-stack too): node
#             addresses 203.0.113.1N and 2001:db8:1::1N, pods from 10.244.N.0/24 and
#             2001:db8:244:N::/64, Services from 10.96.0.0/16,2001:db8:96::/112; its selection is
#             upstream's dual-stack specs (selection.sh) and its ledger cluster dual-stack
#   --focus   ginkgo focus (default: the Services [Conformance] tests, then the proxy tests; see below)
#   --keep    keep the work dir (logs of every component) under /var/tmp
# Env: CONF_NODES (2), CONF_NODES_PER_ZONE (1: node N in zone-N; 2: nodes 1-2 in zone-1, 3-4 in
#      zone-2, ...), CONF_NODE_MEM (3072 MiB), CONF_TIMEOUT (seconds for the whole run, 9000),
#      CONF_GINKGO_TIMEOUT (each e2e.test pass, 2h), CONF_PROCS (parallel ginkgo processes for
#      the full run, 4; the smoke, --focus and --shard runs use 1 unless set; [Serial] specs run
#      alone last)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
export PATH=/usr/local/go/bin:$PATH
smoke='' keep='' nodes=${CONF_NODES:-2} focus='' skip='' shard='' kube_proxy=''
dual_stack=''
[[ ${CONF_CLUSTER:-} != dual-stack ]] || dual_stack=1
while (($#)); do
	case $1 in
	--smoke) smoke=1; shift ;;
	--nodes) nodes=$2; shift 2 ;;
	--focus) focus=$2; shift 2 ;;
	--skip) skip=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	--shard) shard=$2; shift 2 ;;
	--kube-proxy-ipvs) kube_proxy=1; shift ;;
	--dual-stack) dual_stack=1; shift ;;
	*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
node_mem=${CONF_NODE_MEM:-3072}
# Each node a zone of its own by default (the specs that need two zones run); the Traffic
# Distribution specs that need three zones of two nodes each run with CONF_NODES=6
# CONF_NODES_PER_ZONE=2.
nodes_per_zone=${CONF_NODES_PER_ZONE:-1}
[[ $nodes_per_zone =~ ^[1-9]$ ]] || { echo "run.sh: CONF_NODES_PER_ZONE=$nodes_per_zone: 1 to 9" >&2; exit 2; }
timeout=${CONF_TIMEOUT:-9000}

t0=$SECONDS
log() { echo "conformance: [$((SECONDS - t0))s] $*" >&2; }
die() { log "FAILED: $*"; exit 1; }

source "$here/selection.sh"
if [[ -n $smoke ]]; then
	focus='\[sig-network\] Services should serve a basic endpoint from pods +\[Conformance\]'
fi
if [[ -n $shard && ( -n $smoke || -n $focus || -n $skip ) ]]; then
	die "--shard is a shard of the documented selection: not with --smoke, --focus or --skip"
fi
if [[ -n $dual_stack && -n $kube_proxy ]]; then
	die "--dual-stack runs ipvsproxy's DaemonSet: not with --kube-proxy-ipvs"
fi
# What the ledger records: the code's commit ("+dirty" when tracked files differ from it; the
# ledger itself does not count) and which cluster the specs ran on.
run_date=$(date -u +%FT%TZ)
commit=$(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
git -C "$repo" diff --quiet HEAD -- . ':!e2e/conformance/ledger.tsv' 2>/dev/null || commit+=+dirty
cluster=ipv4
[[ -z $kube_proxy ]] || cluster=kube-proxy-ipvs
[[ -z $dual_stack ]] || cluster=dual-stack
select_cluster "$cluster"
if [[ -z $skip ]]; then skip=$selection_skip; fi
# The second family of the dual-stack cluster (e2e/topology/topology.sh's addressing): the
# bridge 2001:db8:1::1, node N 2001:db8:1::1N, its pods 2001:db8:244:N::/64.
service_cidr=10.96.0.0/16
[[ -z $dual_stack ]] || service_cidr=10.96.0.0/16,2001:db8:96::/112

# ---- Debian packages the nodes use (the guests run this machine's binaries): runc, the CNI
# plugins, and the tools images.sh copies into the agnhost image.
need=()
for p in runc containernetworking-plugins netcat-openbsd curl iproute2 openssl busybox-static wget conntrack; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if ((${#need[@]})); then
	log "apt-get install ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# ---- build (cached after the first run; see build.sh for the keys)
bin=$("$here/build.sh")
cp_bin=$("$repo/e2e/controlplane/build.sh")
# ipvsproxy's image as the release builds it (make image: both platforms, one archive).
make -C "$repo" --no-print-directory image IMAGE_REUSE=1 >&2
image_ref=$(cat "$repo/_output/image/IMAGE") # registry.invalid/ipvsproxy:VERSION@sha256:...
log "binaries ready; ipvsproxy image $image_ref"

work=$(mktemp -d /var/tmp/ipvsproxy-conformance.XXXXXX)
ns=ipvsconf-$(basename "$work" | cut -d. -f2)
results=$repo/e2e/results
mkdir -p "$work/images" "$work/pki" "$work/logs" "$results"
"$here/images.sh" "$bin" "$(ls "$repo"/_output/image/ipvsproxy-*.oci.tar)" "$work/images"

# ---- a shard: its specs from a dry run, and a focus proven by a second dry run to select
# exactly them (nothing more, nothing less) before any VM starts.
if [[ -n $shard ]]; then
	mkdir -p "$work/selection/all" "$work/selection/shard"
	dry_run_specs "$bin" "$work/selection/all" "$selection_focus" "$skip" >"$work/selection/all.txt"
	"$bin/conformanceledger" shard -shard "$shard" "$work/selection/all/dry-run.xml" >"$work/selection/shard.txt"
	focus=$("$bin/conformanceledger" shard -shard "$shard" -focus "$work/selection/all/dry-run.xml")
	dry_run_specs "$bin" "$work/selection/shard" "$focus" "$skip" >"$work/selection/shard-dry-run.txt"
	diff "$work/selection/shard.txt" "$work/selection/shard-dry-run.txt" >&2 ||
		die "shard $shard: the focus does not select exactly the shard's specs (diff above)"
	log "shard $shard: $(wc -l <"$work/selection/shard.txt") of $(wc -l <"$work/selection/all.txt") selected specs:"
	sed 's/^/  /' "$work/selection/shard.txt" >&2
fi

pids=()
cleanup() {
	local rc=$?
	set +e
	for n in $(seq 1 "$nodes"); do touch "$work/node$n/stop" 2>/dev/null; done
	# The guests stop their kubelets and containerd, then power off.
	for p in "${vm_pids[@]:-}"; do [[ -n $p ]] && { timeout 120 tail --pid="$p" -f /dev/null; kill "$p" 2>/dev/null; }; done
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	# kube-apiserver drains for a while on SIGTERM; nothing of this run may outlive it.
	for p in "${pids[@]}"; do timeout 20 tail --pid="$p" -f /dev/null || kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	ip netns del "$ns" 2>/dev/null
	if [[ -n $keep || $rc != 0 ]]; then
		log "work dir with every component's log kept: $work"
	else
		rm -rf -- "$work"
	fi
	exit "$rc"
}
trap cleanup EXIT
vm_pids=()

# ---- certificates (openssl): one CA; the API server's serving cert; admin (system:masters)
# for e2e.test, kubectl, the controller manager and the scheduler; one identity per kubelet
# (system:node:NAME, so the Node authorizer applies) that is also its serving cert.
pki=$work/pki
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
	-subj /CN=ipvsproxy-conformance-ca -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
cert() { # NAME SUBJECT SANS
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "$2" \
		-keyout "$pki/$1.key" -out "$pki/$1.csr" 2>/dev/null
	openssl x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 2 \
		-extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$3") \
		-out "$pki/$1.crt" 2>/dev/null
}
cert apiserver /CN=kube-apiserver \
	IP:203.0.113.1,IP:10.96.0.1,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
cert admin /O=system:masters/CN=conformance-admin DNS:admin
openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
kubeconfig() { # OUT CERTNAME
	cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters: [{name: conformance, cluster: {server: "https://203.0.113.1:6443", certificate-authority-data: $(base64 -w0 <"$pki/ca.crt")}}]
users: [{name: u, user: {client-certificate-data: $(base64 -w0 <"$pki/$2.crt"), client-key-data: $(base64 -w0 <"$pki/$2.key")}}]
contexts: [{name: c, context: {cluster: conformance, user: u}}]
current-context: c
KC
}
kubeconfig "$work/admin.kubeconfig" admin
for n in $(seq 1 "$nodes"); do
	cert "node$n" "/O=system:nodes/CN=system:node:node$n" "IP:203.0.113.1$n,${dual_stack:+IP:2001:db8:1::1$n,}DNS:node$n"
	kubeconfig "$work/node$n.kubeconfig" "node$n"
done
chmod -R a+rX "$work"

# ---- the network namespace: bridge, one tap per node, routes to each node's pod subnet
ip netns add "$ns"
# Foreground only: a function run with & is a subshell, and $! would name the subshell, not the
# process (the first runs left API servers behind). Background jobs call ip netns exec directly:
# it execs the command, so $! is the component.
nsx() { ip netns exec "$ns" "$@"; }
ip -n "$ns" link set lo up
ip -n "$ns" link add br0 type bridge
ip -n "$ns" addr add 203.0.113.1/24 dev br0
if [[ -n $dual_stack ]]; then
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.br0.accept_dad=0
	ip -n "$ns" addr add 2001:db8:1::1/64 dev br0 nodad
fi
ip -n "$ns" link set br0 up
for n in $(seq 1 "$nodes"); do
	ip -n "$ns" tuntap add "tap$n" mode tap
	ip -n "$ns" link set "tap$n" master br0 up
	ip -n "$ns" route add "10.244.$n.0/24" via "203.0.113.1$n"
	[[ -z $dual_stack ]] || ip -n "$ns" route add "2001:db8:244:$n::/64" via "2001:db8:1::1$n"
done

# ---- control plane, in the namespace
ip netns exec "$ns" "$cp_bin/etcd" --name conformance --data-dir "$work/etcd" \
	--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
	--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
	--initial-cluster conformance=http://127.0.0.1:2380 --unsafe-no-fsync --log-level warn \
	>"$work/logs/etcd.log" 2>&1 &
pids+=($!)
ip netns exec "$ns" "$cp_bin/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 \
	--bind-address=0.0.0.0 --advertise-address=203.0.113.1 --secure-port=6443 \
	--tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" --client-ca-file="$pki/ca.crt" \
	--kubelet-client-certificate="$pki/admin.crt" --kubelet-client-key="$pki/admin.key" \
	--kubelet-preferred-address-types=InternalIP \
	--service-account-issuer=https://kubernetes.default.svc.cluster.local \
	--service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
	--authorization-mode=Node,RBAC --allow-privileged=true --enable-admission-plugins=NodeRestriction \
	--service-cluster-ip-range="$service_cidr" --profiling=false \
	>"$work/logs/kube-apiserver.log" 2>&1 &
pids+=($!)
kubectl() { nsx "$bin/kubectl" --kubeconfig "$work/admin.kubeconfig" "$@"; }
until kubectl get --raw /readyz >/dev/null 2>&1; do
	((SECONDS - t0 < timeout)) || die "kube-apiserver not ready"
	sleep 1
done
log "kube-apiserver ready"
ip netns exec "$ns" "$bin/clusterdns" --kubeconfig="$work/admin.kubeconfig" --listen=203.0.113.1:53 \
	>"$work/logs/clusterdns.log" 2>&1 &
pids+=($!)
kubectl apply --server-side --field-manager=conformance -f "$here/cluster-dns.yaml" >&2
ip netns exec "$ns" "$bin/kube-controller-manager" --kubeconfig="$work/admin.kubeconfig" \
	--authentication-kubeconfig="$work/admin.kubeconfig" --authorization-kubeconfig="$work/admin.kubeconfig" \
	--service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
	--use-service-account-credentials=true --leader-elect=false --bind-address=127.0.0.1 \
	--cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
	--service-cluster-ip-range="$service_cidr" --profiling=false \
	>"$work/logs/kube-controller-manager.log" 2>&1 &
pids+=($!)
ip netns exec "$ns" "$bin/kube-scheduler" --kubeconfig="$work/admin.kubeconfig" \
	--authentication-kubeconfig="$work/admin.kubeconfig" --authorization-kubeconfig="$work/admin.kubeconfig" \
	--leader-elect=false --bind-address=127.0.0.1 --profiling=false \
	>"$work/logs/kube-scheduler.log" 2>&1 &
pids+=($!)

# ---- nodes: one VM each, on its tap
"$repo/e2e/vm/prepare.sh" >/dev/null
reference=()
[[ -z $kube_proxy ]] || reference=(-e KUBE_PROXY_BIN="$cp_bin/kube-proxy")
for n in $(seq 1 "$nodes"); do
	routes='' dual=()
	for m in $(seq 1 "$nodes"); do
		((m == n)) || routes+="10.244.$m.0/24=203.0.113.1$m "
		((m == n)) || [[ -z $dual_stack ]] || routes+="2001:db8:244:$m::/64=2001:db8:1::1$m "
	done
	[[ -z $dual_stack ]] || dual=(-e NODE_IP6="2001:db8:1::1$n" -e NODE_GATEWAY6=2001:db8:1::1 -e POD_CIDR6="2001:db8:244:$n::/64")
	mkdir -p "$work/node$n"
	ip netns exec "$ns" env IPVSPROXY_VM_PREPARED=1 "$repo/e2e/vm/run.sh" --tap "tap$n=203.0.113.1$n/24" --mem "$node_mem" \
		--timeout "$timeout" --results "$work/node$n" \
		-e CONF_BIN="$bin" -e CONF_WORK="$work" -e NODE_NAME="node$n" -e NODE_IP="203.0.113.1$n" \
		-e NODE_GATEWAY=203.0.113.1 -e POD_CIDR="10.244.$n.0/24" -e "POD_ROUTES=$routes" \
		-e NODE_ZONE="zone-$(((n - 1) / nodes_per_zone + 1))" \
		-e NODE_RESULTS="$work/node$n" "${reference[@]}" "${dual[@]}" -- "$here/node.sh" >"$work/logs/vm-node$n.log" 2>&1 &
	vm_pids+=($!)
done
log "kube-controller-manager, kube-scheduler and $nodes node VMs started"
until [[ $(kubectl get nodes --no-headers 2>/dev/null | grep -cw Ready) == "$nodes" ]]; do
	for p in "${vm_pids[@]}"; do kill -0 "$p" 2>/dev/null || { tail -30 "$work"/logs/vm-node*.log >&2; die "a node VM stopped"; }; done
	((SECONDS - t0 < timeout)) || die "nodes not Ready"
	sleep 5
done
log "nodes Ready: $(kubectl get nodes --no-headers | awk '{ printf "%s ", $1 }')"

if [[ -n $kube_proxy ]]; then
	# ---- the reference: kube-proxy on every node (node.sh), synced once its healthz answers 200
	t_ds=$SECONDS
	for n in $(seq 1 "$nodes"); do
		until nsx curl -sf -o /dev/null "http://203.0.113.1$n:10256/healthz"; do
			((SECONDS - t0 < timeout)) || { tail -30 "$work/node$n/kube-proxy.log" >&2; die "kube-proxy on node$n not healthy"; }
			sleep 5
		done
	done
	log "kube-proxy (IPVS mode) healthy on $nodes nodes after $((SECONDS - t_ds))s"
else
	# ---- ipvsproxy as a user installs it: server-side apply of deploy/base plus an overlay
	t_ds=$SECONDS
	overlay=$here/overlay
	[[ -z $dual_stack ]] || overlay=$here/overlay-dual-stack
	# The overlay with the image pinned by the digest of the archive the nodes imported, as a
	# user pins the release's (docs/install.md).
	mkdir -p "$work/overlay-pinned"
	printf 'resources:\n  - %s\nimages:\n  - name: registry.invalid/ipvsproxy\n    digest: %s\n' \
		"$(realpath --relative-to="$work/overlay-pinned" "$overlay")" "${image_ref##*@}" >"$work/overlay-pinned/kustomization.yaml"
	kubectl apply --server-side --field-manager=conformance -k "$work/overlay-pinned" >&2
	until kubectl -n kube-system rollout status daemonset/ipvsproxy --timeout=10s >/dev/null 2>&1; do
		((SECONDS - t0 < timeout)) || { kubectl -n kube-system describe pods -l app.kubernetes.io/name=ipvsproxy >&2; die "ipvsproxy DaemonSet not Ready"; }
		# Nothing can be pulled here: a pull means the imported image was not found, for good.
		if kubectl -n kube-system get pods -l app.kubernetes.io/name=ipvsproxy -o jsonpath='{..waiting.reason}' 2>/dev/null | grep -qE 'ErrImagePull|ImagePullBackOff'; then
			kubectl -n kube-system describe pods -l app.kubernetes.io/name=ipvsproxy >&2
			die "the kubelet tried to pull ipvsproxy's image $image_ref: the imported archive was not found by its digest"
		fi
	done
	log "ipvsproxy DaemonSet Ready on $nodes nodes after $((SECONDS - t_ds))s"
	# The base's publisher of Node addresses: available, and its slices name every node (what
	# each daemon's address guard reads instead of watching every Node).
	t_pub=$SECONDS
	published() {
		kubectl -n ipvsproxy-node-addresses get endpointslices \
			-o jsonpath='{range .items[*].endpoints[*]}{.nodeName}{"\n"}{end}' 2>/dev/null | sort -u | grep -c . || true
	}
	until kubectl -n kube-system rollout status deployment/ipvsproxy-node-addresses --timeout=10s >/dev/null 2>&1 &&
		(($(published) >= nodes)); do
		((SECONDS - t_pub < 600)) || {
			kubectl -n kube-system describe pods -l app.kubernetes.io/name=ipvsproxy-node-addresses >&2
			die "the Node address publisher is not available, or its slices name $(published) of $nodes nodes, after 600 s"
		}
		sleep 2
	done
	log "the Node address publisher available, every node's addresses published, after $((SECONDS - t_pub))s"
	kubectl -n kube-system get pods -o wide >&2
fi

# ---- the tests
stamp=$(date -u +%Y%m%dT%H%M%SZ)
report=$results/conformance-$stamp${smoke:+-smoke}
mkdir -p "$report"
t_tests=$SECONDS
# Under emulation a spec spends most of its time waiting for pods, so the full run spreads specs
# over CONF_PROCS ginkgo processes; one process runs e2e.test directly.
procs=${CONF_PROCS:-$([[ -n $smoke || -n $focus ]] && echo 1 || echo 4)}
passes=() # in the order they ran: the ledger's order is the order of events
run_suite() { # NAME FOCUS [EXTRA_SKIP]
	log "e2e.test $1 ($procs processes): focus $2"
	passes+=("$1")
	mkdir -p "$report/$1"
	local args=(--kubeconfig="$work/admin.kubeconfig" --kubectl-path="$bin/kubectl"
		--report-dir="$report/$1" --e2e-output-dir="$report/$1" --dump-logs-on-failure=false --minStartupPods=0
		--non-blocking-taints=node-role.kubernetes.io/control-plane
		# Only process 1 counts the nodes when this is left at -1: specs needing two would
		# skip on the others ("Requires at least 2 nodes (not -1)").
		--num-nodes="$nodes")
	local focus=$2 skip_re="$skip${3:+|$3}" timeout=${CONF_GINKGO_TIMEOUT:-2h}
	if ((procs > 1)); then
		nsx "$bin/ginkgo" --procs="$procs" --focus="$focus" --skip="$skip_re" --no-color -v \
			--timeout="$timeout" "$bin/e2e.test" -- "${args[@]}" >"$report/$1/e2e.log" 2>&1 || true
	else
		nsx "$bin/e2e.test" "${args[@]}" --ginkgo.focus="$focus" --ginkgo.skip="$skip_re" \
			--ginkgo.no-color --ginkgo.timeout="$timeout" --ginkgo.v >"$report/$1/e2e.log" 2>&1 || true
	fi
}
if [[ -n $shard ]]; then
	run_suite shard "$focus"
elif [[ -n $smoke || -n $focus ]]; then
	run_suite focused "${focus}"
elif [[ -n $dual_stack ]]; then
	run_suite dual-stack "$dual_stack_focus"
else
	run_suite services-conformance "$default_focus"
	run_suite proxy "$proxy_focus" "$default_focus"
fi
# A spec that failed among parallel ones runs again alone: emulation is slow enough that some
# time-bound specs (a 100 s grace period checked by ten kubectl execs) only fit without the
# others. summary.sh lists each such spec with its first failure.
if ((procs > 1)); then
	rerun=$("$bin/junitsummary" -failed-focus "$report"/*/junit_01.xml 2>/dev/null || true)
	if [[ -n $rerun ]]; then
		procs=1
		run_suite rerun-serial "$rerun"
	fi
fi
log "tests took $((SECONDS - t_tests))s"
cp "$work"/logs/*.log "$report/" 2>/dev/null || true
for n in $(seq 1 "$nodes"); do
	cp "$work/node$n/kubelet.log" "$report/kubelet-node$n.log" 2>/dev/null || true
	cp "$work/node$n/kube-proxy.log" "$report/kube-proxy-node$n.log" 2>/dev/null || true
done
kubectl -n kube-system logs -l app.kubernetes.io/name=ipvsproxy --tail=-1 --prefix >"$report/ipvsproxy.log" 2>&1 || true
# The ledger: a shard's or a full run's results, appended (never rewritten); commit it.
if [[ -n $shard || ( -z $smoke && -z $focus ) ]]; then
	# In run order, not the glob's: rerun-serial sorts before shard and proxy, and a spec's
	# latest line must be its rerun's.
	reports=()
	for pass in "${passes[@]}"; do
		[[ ! -e $report/$pass/junit_01.xml ]] || reports+=("$report/$pass/junit_01.xml")
	done
	if ((${#reports[@]})); then
		"$bin/conformanceledger" append -ledger "$here/ledger.tsv" -date "$run_date" -commit "$commit" \
			-cluster "$cluster" -nodes "$nodes" -shard "${shard:-all}" "${reports[@]}" >&2 || log "FAILED to append to the ledger"
	else
		log "no JUnit report: nothing for the ledger (see $report/*/e2e.log)"
	fi
fi
# The DaemonSet's container reads the real servers of a full re-check from /proc/net/ip_vs
# (ipvs.RealServerTable), not one netlink dump per virtual server: inspect, run in each pod as an
# operator would, names how the last full sync read them. Wait for a full sync that read at least
# one virtual server (the first read a kernel without ours; one comes every 30 s).
table_read=0
if [[ -z $kube_proxy ]]; then
	table_read=1
	for pod in $(kubectl -n kube-system get pods -l app.kubernetes.io/name=ipvsproxy -o name); do
		line='' t_read=$SECONDS
		while ((SECONDS - t_read < 90)); do
			line=$(kubectl -n kube-system exec "$pod" -- /usr/local/bin/ipvsproxy inspect 2>/dev/null | grep '^last full read:' || true)
			[[ ! $line =~ of\ [1-9][0-9]*\ virtual\ servers\ from\ /proc/net/ip_vs ]] || break
			sleep 5
		done
		log "$pod: ${line:-no last full read in inspect}"
		if [[ ! $line =~ of\ [1-9][0-9]*\ virtual\ servers\ from\ /proc/net/ip_vs,\ 0\ one\ dump\ each$ ]]; then
			log "FAILED: $pod's last full read did not take every real server from /proc/net/ip_vs"
			table_read=2
		fi
	done
fi
status=0
CONF_BIN=$bin "$here/summary.sh" "$report" || status=$?
((table_read != 2)) || status=1
exit "$status"
