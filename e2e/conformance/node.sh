#!/usr/bin/env bash
# node.sh — one Kubernetes node, run as root inside a VM guest by run.sh (never on a host): it
# mounts what a node needs on the guest's overlay, starts containerd (images imported from the
# archives images.sh wrote; nothing is pulled), configures bridge + host-local CNI for this
# node's pod subnet and starts the kubelet, then waits until the host asks it to stop (the file
# $NODE_RESULTS/stop) and stops both. Its logs go to $NODE_RESULTS.
#
# Environment (run.sh -e): CONF_BIN (build.sh's dir), CONF_WORK (the run's work dir: pki,
# kubeconfigs, images), NODE_NAME, NODE_IP, NODE_GATEWAY (the host side of the bridge),
# POD_CIDR (this node's), POD_ROUTES ("CIDR=VIA ..." for the other nodes' pod subnets),
# NODE_RESULTS (the writable share), KUBE_PROXY_BIN (when set: this kube-proxy runs on the node
# in IPVS mode, the test bed's reference in place of ipvsproxy's DaemonSet). The dual-stack
# cluster (run.sh --dual-stack) adds NODE_IP6, NODE_GATEWAY6 and POD_CIDR6, and POD_ROUTES then
# holds the other nodes' IPv6 pod subnets too.
set -euo pipefail
[[ $(id -u) == 0 && -n ${NODE_RESULTS:-} ]] || { echo "node.sh runs inside the VM (e2e/conformance/run.sh)" >&2; exit 2; }
log() { echo "node.sh $NODE_NAME: [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
bin=$CONF_BIN work=$CONF_WORK out=$NODE_RESULTS
export PATH=$bin:$PATH

# What ipvsproxy and kube-proxy's tests need; the ipvsproxy container cannot load modules itself
# here: the guest's /lib/modules/<release> is a link to the host's cache, absent in its mount.
modprobe -a overlay br_netfilter bridge veth ip_vs ip_vs_rr ip_vs_wrr ip_vs_sh ip_vs_twos dummy \
	nf_conntrack nf_conntrack_netlink ip_set ip_set_hash_ip ip_set_hash_ipport ip_set_hash_ipportip \
	ip_set_hash_ipportnet ip_set_hash_net ip_set_bitmap_port xt_set xt_mark xt_comment xt_conntrack \
	xt_addrtype xt_MASQUERADE xt_nat iptable_nat iptable_filter iptable_mangle nft_compat nf_nat \
	xt_statistic xt_physdev 2>&1 || true
[[ -z ${NODE_IP6:-} ]] || modprobe -a ip6_tables ip6table_nat ip6table_filter ip6table_mangle nf_defrag_ipv6 2>&1 || true

# cgroup v2 with every controller delegated to the root's children (the kubelet's cgroupfs driver).
mountpoint -q /sys/fs/cgroup || mount -t cgroup2 none /sys/fs/cgroup
for c in $(</sys/fs/cgroup/cgroup.controllers); do echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true; done
# containerd's overlayfs snapshotter cannot put its layers on the guest's overlay root.
for d in /var/lib/containerd /var/lib/kubelet /var/log/pods /var/log/containers /run/containerd /etc/cni/net.d; do
	mkdir -p "$d"; mount -t tmpfs -o mode=0755 tmpfs "$d"
done
mount --make-rshared /
hostname "$NODE_NAME"
echo "$NODE_NAME" >/etc/hostname
printf '127.0.0.1 localhost\n%s %s\n' "$NODE_IP" "$NODE_NAME" >/etc/hosts
: >/etc/resolv.conf

dual_stack=${NODE_IP6:+1}
if [[ -n $dual_stack ]]; then
	# No duplicate address detection: the address is usable at once, and the tests' pods'
	# addresses on cni0 too (the bridge is new, nobody else holds them).
	sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.eth0.accept_dad=0
	ip -6 addr add "$NODE_IP6/64" dev eth0 nodad
	ip -6 route add default via "$NODE_GATEWAY6"
	sysctl -qw net.ipv6.conf.all.forwarding=1
fi
ip route add default via "$NODE_GATEWAY"
for r in ${POD_ROUTES:-}; do ip route add "${r%%=*}" via "${r#*=}"; done
sysctl -qw net.ipv4.ip_forward=1
# Bridged pod-to-pod traffic must pass iptables, as kube-proxy and ipvsproxy expect
# (kubernetes/kubernetes#21613); the module may be missing, which the log then shows.
sysctl -qw net.bridge.bridge-nf-call-iptables=1 || log "no br_netfilter: bridged traffic bypasses iptables"
[[ -z $dual_stack ]] || sysctl -qw net.bridge.bridge-nf-call-ip6tables=1 || log "no br_netfilter: bridged IPv6 traffic bypasses ip6tables"

# Pod traffic to addresses outside the pod network leaves with this node's address, as kind's
# kindnet (its masquerade agent, the network upstream's e2e jobs run on) does: a pod calling
# another node's NodePort then arrives from this node, not from a pod address that the proxy
# (as kube-proxy's ClusterCIDR local detection) takes for in-cluster traffic, which the
# externalTrafficPolicy=Local specs expect. The bridge's own ipMasq would also masquerade
# pod-to-pod traffic between nodes and lose the source IPs the other specs check.
iptables -t nat -N CONF-MASQ
iptables -t nat -A CONF-MASQ -d 10.244.0.0/16 -j RETURN
iptables -t nat -A CONF-MASQ -s 10.244.0.0/16 -j MASQUERADE
iptables -t nat -A POSTROUTING -m addrtype ! --dst-type LOCAL -j CONF-MASQ
if [[ -n $dual_stack ]]; then
	ip6tables -t nat -N CONF-MASQ
	ip6tables -t nat -A CONF-MASQ -d 2001:db8:244::/48 -j RETURN
	ip6tables -t nat -A CONF-MASQ -s 2001:db8:244::/48 -j MASQUERADE
	ip6tables -t nat -A POSTROUTING -m addrtype ! --dst-type LOCAL -j CONF-MASQ
fi

# The pod subnets of this node (one per family) and the default routes pods get.
ranges="[{\"subnet\": \"$POD_CIDR\"}]" pod_routes='{"dst": "0.0.0.0/0"}'
if [[ -n $dual_stack ]]; then
	ranges+=", [{\"subnet\": \"$POD_CIDR6\"}]" pod_routes+=', {"dst": "::/0"}'
fi

cat >/etc/cni/net.d/10-pods.conflist <<CNI
{
  "cniVersion": "1.0.0",
  "name": "pods",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [$ranges], "routes": [$pod_routes],
              "dataDir": "/run/cni-ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CNI
mkdir -p /etc/containerd
cat >/etc/containerd/config.toml <<TOML
version = 3
root = '/var/lib/containerd'
state = '/run/containerd'
[grpc]
  address = '/run/containerd/containerd.sock'
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = 'registry.k8s.io/pause:3.10.2'
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = 'io.containerd.runc.v2'
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
    BinaryName = '/usr/sbin/runc'
    SystemdCgroup = false
[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ['/usr/lib/cni']
  conf_dir = '/etc/cni/net.d'
TOML
containerd --config /etc/containerd/config.toml >"$out/containerd.log" 2>&1 &
containerd_pid=$!
until ctr version >/dev/null 2>&1; do
	kill -0 "$containerd_pid" 2>/dev/null || { log "containerd exited"; tail -20 "$out/containerd.log"; exit 1; }
	sleep 0.5
done
log "containerd up"
for img in "$work"/images/*.tar; do
	ctr -n k8s.io images import "$img" >/dev/null || { log "import of $img failed"; exit 1; }
done
# ipvsproxy's DaemonSet runs the release's image by digest (run.sh), as docs/install.md says to:
# the CRI resolves a reference against the images' names, so the imported image also gets the
# name REPOSITORY@DIGEST (what a pull by digest would have named it).
if [[ -f $work/images/ipvsproxy.ref ]]; then
	ref=$(cat "$work/images/ipvsproxy.ref") # REPOSITORY:TAG@DIGEST
	tagged=${ref%@*}
	ctr -n k8s.io images tag --local "$tagged" "${tagged%:*}@${ref##*@}" >/dev/null ||
		{ log "naming $tagged by its digest failed"; exit 1; }
fi
log "images: $(ctr -n k8s.io images ls -q | grep -v '^sha256:' | tr '\n' ' ')"

mkdir -p /var/lib/kubelet
cat >/var/lib/kubelet/config.yaml <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $work/pki/ca.crt}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
failSwapOn: false
clusterDomain: cluster.local
clusterDNS: [10.96.0.10]
resolvConf: /etc/resolv.conf
tlsCertFile: $work/pki/$NODE_NAME.crt
tlsPrivateKeyFile: $work/pki/$NODE_NAME.key
# Everything lives in the guest's memory: eviction and image GC would only remove the images
# that cannot be pulled again.
evictionHard: {memory.available: 50Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: 60
YAML
# NODE_ZONE (run.sh's CONF_NODES_PER_ZONE): by default each node is a zone of its own, so the
# topology specs that need two zones run (Topology Hints); those that need three zones of two
# nodes each run on six nodes in pairs.
kubelet --config=/var/lib/kubelet/config.yaml --kubeconfig="$work/$NODE_NAME.kubeconfig" \
	--node-ip="$NODE_IP${NODE_IP6:+,$NODE_IP6}" --hostname-override="$NODE_NAME" --node-labels="topology.kubernetes.io/zone=${NODE_ZONE:-zone-${NODE_NAME#node}}" \
	--v=2 >"$out/kubelet.log" 2>&1 &
kubelet_pid=$!
log "kubelet started"

# The reference run: upstream's kube-proxy in IPVS mode, a process of the node (as kube-up's
# nodes once ran it), configured as deploy/base and the overlay configure ipvsproxy: the same
# cluster CIDR, NodePort addresses, sync periods and bind addresses. It uses the guest's (this
# machine's) iptables and ipset.
if [[ -n ${KUBE_PROXY_BIN:-} ]]; then
	cat >/var/lib/kube-proxy.yaml <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $work/admin.kubeconfig}
mode: ipvs
hostnameOverride: $NODE_NAME
clusterCIDR: 10.244.0.0/16
nodePortAddresses: [203.0.113.0/24]
healthzBindAddress: 0.0.0.0:10256
metricsBindAddress: 127.0.0.1:10249
ipvs: {syncPeriod: 30s, minSyncPeriod: 1s}
conntrack: {maxPerCore: 0}
YAML
	"$KUBE_PROXY_BIN" --config=/var/lib/kube-proxy.yaml --v=2 >"$out/kube-proxy.log" 2>&1 &
	kube_proxy_pid=$!
	log "kube-proxy (IPVS mode) started: $("$KUBE_PROXY_BIN" --version 2>&1)"
fi
touch "$out/started"

while [[ ! -e $out/stop ]]; do
	kill -0 "$kubelet_pid" 2>/dev/null || { log "kubelet exited"; tail -30 "$out/kubelet.log"; break; }
	[[ -z ${kube_proxy_pid:-} ]] || kill -0 "$kube_proxy_pid" 2>/dev/null || { log "kube-proxy exited"; tail -30 "$out/kube-proxy.log"; break; }
	sleep 3
done
log "stopping"
kill "$kubelet_pid" ${kube_proxy_pid:-} 2>/dev/null || true
wait "$kubelet_pid" ${kube_proxy_pid:-} 2>/dev/null || true
ctr -n k8s.io tasks ls -q 2>/dev/null | while read -r t; do ctr -n k8s.io tasks kill -s KILL "$t" >/dev/null 2>&1 || true; done
# What the proxy left in the kernel, for the log.
{ ipvsadm -Ln 2>/dev/null | head -50; ip -br addr; } >"$out/kernel-state.txt" 2>&1 || true
kill "$containerd_pid" 2>/dev/null || true
wait "$containerd_pid" 2>/dev/null || true
log "stopped"
