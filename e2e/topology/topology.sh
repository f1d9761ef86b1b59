#!/usr/bin/env bash
# topology.sh — the end-to-end test network, built from network namespaces inside the
# VM (run it as root in the guest; `up` first loads veth, bridge, dummy and ip_vs, so on a host
# without them it stops before touching anything). Every address is a documentation range or a pod address that exists
# only inside these namespaces.
#
#                       VM root namespace: bridge e2ebr0 198.51.100.254/24, 2001:db8:1::fe/64
#        ┌──────────────┬──────────────┬──────────────────┬────────────────────┐
#   node1 198.51.100.1  node2 198.51.100.2  client 198.51.100.79  lb 198.51.100.140
#         2001:db8:1::1       2001:db8:1::2        2001:db8:1::79        2001:db8:1::140
#   pods 10.244.1.0/24  pods 10.244.2.0/24  (outside the cluster)  VIP 203.0.113.140
#   2001:db8:244:1::/64 2001:db8:244:2::/64                        VIP6 2001:db8:113::140
#
# Dual-stack: every namespace has an IPv6 address beside its IPv4 one. A pod 10.244.N.X also has
# 2001:db8:244:N::X/128 with a default route via fe80::1, which its node's veth end holds (the
# IPv6 form of proxy ARP). Addresses skip duplicate address detection (nodad, accept_dad=0): a
# tentative address would not answer for its first second.
#
# Pods hang off their node by one veth each, routed, not bridged (as Calico does): the pod has
# IP/32 and a default route via 169.254.1.1, which the node's end answers by proxy ARP. So every
# packet between pods, even on one node, crosses the node's IP stack, where IPVS sees it; a node
# bridge would need br_netfilter for IPVS to see replies between pods of the same node.
# Each node routes the other node's pod CIDR via the other node's address.
#
# The load balancer is IPVS in direct-routing mode in namespace lb: the client routes
# 203.0.113.0/24 via 198.51.100.140; lb rewrites only the destination MAC to a node's, so the
# node receives the packet with the client's source and the VIP as destination (the proxier binds
# LB ingress IPs on kube-ipvs0, which makes the VIP local there) and answers the client directly.
# `lb-add` can weight each node by its health-check node port (200 → 1, otherwise 0), as cloud
# load balancers do with externalTrafficPolicy: Local.
#
# When the VM has its restricted user NIC (run.sh --host-port; E2E_HOST_ADDR set), the root
# namespace masquerades node traffic to E2E_HOST_ADDR only, so a proxier in a node can reach an
# API server on the host; nothing else is routed out. With E2E_API_VIP set too, that address's
# port 6443 is a VIP in front of the API server, as an HA cluster's load balancer or kubeadm's
# controlPlaneEndpoint is: the root namespace DNATs it to E2E_HOST_ADDR:6443 (for the nodes'
# traffic and its own), and it is no endpoint of default/kubernetes.
#
# Commands:
#   up                              build bridge, node1, node2, client, lb
#   down                            remove everything this script made (safe to repeat)
#   add-pod NODE NAME IP            pod namespace NAME with IP (inside NODE's pod CIDR) and its IPv6
#                                   twin 2001:db8:244:N::X
#   del-pod NAME
#   echo NS [ECHOSERVER ARGS...]    start $ECHOSERVER in NS in the background (-name NS)
#   lb-add PROTO PORT [HCPORT]      IPVS DR service VIP:PORT in lb to both nodes (tcp|udp);
#                                   with HCPORT a checker polls http://NODE:HCPORT/healthz
#   lb-del PROTO PORT
#   lb6-add PROTO PORT [HCPORT]     the same for VIP6 [2001:db8:113::140]:PORT to the nodes' IPv6 addresses
#   lb6-del PROTO PORT
#   exec NS CMD...                  run CMD in namespace NS
set -euo pipefail

readonly bridge=e2ebr0 bridge_addr=198.51.100.254 prefix=24
readonly client_addr=198.51.100.79 lb_addr=198.51.100.140 vip=203.0.113.140
readonly bridge_addr6=2001:db8:1::fe prefix6=64
readonly client_addr6=2001:db8:1::79 lb_addr6=2001:db8:1::140 vip6=2001:db8:113::140
readonly state=/run/e2e-topology
readonly nodes=(node1 node2)

node_addr() { echo "198.51.100.${1#node}"; }
pod_cidr() { echo "10.244.${1#node}.0/24"; }
node_addr6() { echo "2001:db8:1::${1#node}"; }
pod_cidr6() { echo "2001:db8:244:${1#node}::/64"; }
# pod_ip6 10.244.N.X: the pod's IPv6 address, 2001:db8:244:N::X.
pod_ip6() { awk -F. '{ printf "2001:db8:244:%s::%s\n", $3, $4 }' <<<"$1"; }
die() { echo "topology: $*" >&2; exit 1; }
in_ns() { ip netns exec "$@"; }
ns_sysctl() { ip netns exec "$1" sysctl -qw "$2" >/dev/null; }

# attach NS ADDR ADDR6: a veth from the bridge into NS, named eth0 there, with ADDR/24 and ADDR6/64.
attach() {
	local ns=$1 addr=$2 addr6=$3
	ip netns add "$ns"
	ip -n "$ns" link set lo up
	ip link add "br-$ns" type veth peer name eth0 netns "$ns"
	ip link set "br-$ns" master "$bridge" up
	ns_sysctl "$ns" net.ipv6.conf.eth0.accept_dad=0
	ip -n "$ns" addr add "$addr/$prefix" dev eth0
	ip -n "$ns" addr add "$addr6/$prefix6" dev eth0 nodad
	ip -n "$ns" link set eth0 up
}

cmd_up() {
	[[ ! -d $state ]] || die "already up (run: $0 down)"
	modprobe -a veth bridge dummy ip_vs ip_vs_rr
	mkdir -p "$state"
	# No multicast snooping: neighbour solicitations go to every port, whoever sent MLD reports.
	ip link add "$bridge" type bridge forward_delay 0 mcast_snooping 0
	sysctl -qw "net.ipv6.conf.$bridge.accept_dad=0"
	ip addr add "$bridge_addr/$prefix" dev "$bridge"
	ip addr add "$bridge_addr6/$prefix6" dev "$bridge" nodad
	ip link set "$bridge" up

	local n other
	for n in "${nodes[@]}"; do
		attach "$n" "$(node_addr "$n")" "$(node_addr6 "$n")"
		ip -n "$n" route add default via "$bridge_addr"
		ns_sysctl "$n" net.ipv4.ip_forward=1
		ns_sysctl "$n" net.ipv6.conf.all.forwarding=1
	done
	for n in "${nodes[@]}"; do
		for other in "${nodes[@]}"; do
			[[ $other == "$n" ]] && continue
			ip -n "$n" route add "$(pod_cidr "$other")" via "$(node_addr "$other")"
			ip -n "$n" route add "$(pod_cidr6 "$other")" via "$(node_addr6 "$other")"
		done
	done

	attach client "$client_addr" "$client_addr6"
	ip -n client route add 203.0.113.0/24 via "$lb_addr"
	ip -n client route add 2001:db8:113::/64 via "$lb_addr6"

	attach lb "$lb_addr" "$lb_addr6"
	# The VIP must be local in lb for IPVS to take the packet in.
	ip -n lb addr add "$vip/32" dev lo
	ip -n lb addr add "$vip6/128" dev lo nodad

	if [[ -n ${E2E_HOST_ADDR:-} ]] && ip link show eth0 >/dev/null 2>&1; then
		sysctl -qw net.ipv4.ip_forward=1
		iptables -t nat -A POSTROUTING -s 198.51.100.0/24 -d "$E2E_HOST_ADDR/32" -o eth0 \
			-m comment --comment e2e-topology -j MASQUERADE
		echo "$E2E_HOST_ADDR" >"$state/host-route"
		if [[ -n ${E2E_API_VIP:-} ]]; then
			api_vip_rules -A
			echo "$E2E_API_VIP" >"$state/api-vip"
		fi
	fi
	echo "topology: up (nodes ${nodes[*]}, client $client_addr $client_addr6, lb $lb_addr VIP $vip, VIP6 $vip6)"
}

# api_vip_rules -A|-D: E2E_API_VIP:6443 DNATed to the API server (E2E_HOST_ADDR:6443), for
# the nodes' traffic (PREROUTING) and the root namespace's own (OUTPUT).
api_vip_rules() {
	local chain
	for chain in PREROUTING OUTPUT; do
		iptables -t nat "$1" "$chain" -d "$E2E_API_VIP/32" -p tcp --dport 6443 -m comment --comment e2e-topology \
			-j DNAT --to-destination "$E2E_HOST_ADDR:6443"
	done
}

cmd_add_pod() {
	(($# == 3)) || die "usage: add-pod NODE NAME IP"
	local node=$1 name=$2 ip=$3
	[[ -d /run/netns && -e /run/netns/$node ]] || die "no node $node"
	local cidr
	cidr=$(pod_cidr "$node")
	[[ $ip == "${cidr%0/24}"* ]] || die "pod IP $ip is outside $node's pod CIDR $cidr"
	local veth="v-$name"
	((${#veth} <= 15)) || die "pod name $name too long for an interface name"

	local ip6
	ip6=$(pod_ip6 "$ip")

	ip netns add "$name"
	ip -n "$name" link set lo up
	ip -n "$node" link add "$veth" type veth peer name eth0 netns "$name"
	ns_sysctl "$name" net.ipv6.conf.eth0.accept_dad=0
	ip -n "$name" addr add "$ip/32" dev eth0
	ip -n "$name" addr add "$ip6/128" dev eth0 nodad
	ip -n "$name" link set eth0 up
	ip -n "$name" route add 169.254.1.1 dev eth0
	ip -n "$name" route add default via 169.254.1.1 dev eth0
	ip -n "$name" route add default via fe80::1 dev eth0
	# proxy_delay=0: a proxied ARP reply is otherwise delayed up to 0.8 s.
	ns_sysctl "$node" "net.ipv4.conf.$veth.proxy_arp=1"
	ns_sysctl "$node" "net.ipv4.neigh.$veth.proxy_delay=0"
	ns_sysctl "$node" "net.ipv6.conf.$veth.accept_dad=0"
	ip -n "$node" addr add fe80::1/64 dev "$veth" nodad
	ip -n "$node" link set "$veth" up
	ip -n "$node" route add "$ip/32" dev "$veth"
	ip -n "$node" route add "$ip6/128" dev "$veth"
	echo "$name $node $ip $ip6" >>"$state/pods"
}

kill_pids_of() {
	local ns=$1 f pid
	for f in "$state/$ns".*.pid; do
		[[ -e $f ]] || continue
		pid=$(<"$f")
		kill "$pid" 2>/dev/null || true
		rm -f "$f"
	done
}

cmd_del_pod() {
	local name=$1
	kill_pids_of "$name"
	ip netns del "$name" 2>/dev/null || true
	[[ -f $state/pods ]] && sed -i "/^$name /d" "$state/pods"
	return 0
}

cmd_echo() {
	local ns=$1
	shift
	local bin=${ECHOSERVER:-}
	[[ -x $bin ]] || die "set ECHOSERVER to the echoserver binary (e2e/echoserver)"
	in_ns "$ns" "$bin" -name "$ns" "$@" >"$state/$ns.echo.log" 2>&1 &
	echo $! >"$state/$ns.echo.pid"
	# Wait until it listens; emulated CPUs start programs slowly.

	for _ in $(seq 100); do
		in_ns "$ns" ss -Hltnu 2>/dev/null | grep -q . && return 0
		sleep 0.1
	done
	cat "$state/$ns.echo.log" >&2
	die "echoserver in $ns did not start listening"
}

ipvs_proto_flag() {
	case $1 in
	tcp) echo -t ;;
	udp) echo -u ;;
	*) die "protocol must be tcp or udp, got $1" ;;
	esac
}

# lb_family 4|6: sets lb_vip and lb_node (a function: a node's address in URL and ipvsadm form)
# for the family; IPv6 addresses go in brackets.
lb_family() {
	if [[ $1 == 6 ]]; then
		lb_vip="[$vip6]" lb_node=lb_node6 lb_suffix=6
	else
		lb_vip=$vip lb_node=node_addr lb_suffix=
	fi
}
lb_node6() { echo "[$(node_addr6 "$1")]"; }

# cmd_lb_add 4|6 PROTO PORT [HCPORT]
cmd_lb_add() {
	local family=$1
	shift
	(($# >= 2)) || die "usage: lb-add PROTO PORT [HCPORT]"
	local proto=$1 port=$2 hc=${3:-} flag n weight=1
	flag=$(ipvs_proto_flag "$proto")
	lb_family "$family"
	in_ns lb ipvsadm -A "$flag" "$lb_vip:$port" -s rr
	# With a health check, nodes start drained and earn traffic by answering 200.
	[[ -n $hc ]] && weight=0
	for n in "${nodes[@]}"; do
		in_ns lb ipvsadm -a "$flag" "$lb_vip:$port" -r "$($lb_node "$n"):$port" -g -w "$weight"
	done
	[[ -n $hc ]] || return 0
	(
		while :; do
			for n in "${nodes[@]}"; do
				code=$(in_ns lb curl -gs -o /dev/null -w '%{http_code}' --max-time 2 \
					"http://$($lb_node "$n"):$hc/healthz" || true)
				w=0
				[[ $code == 200 ]] && w=1
				in_ns lb ipvsadm -e "$flag" "$lb_vip:$port" -r "$($lb_node "$n"):$port" -g -w "$w" || true
			done
			sleep 1
		done
	) >/dev/null 2>&1 &
	echo $! >"$state/lb.health$lb_suffix-$proto-$port.pid"
}

# cmd_lb_del 4|6 PROTO PORT
cmd_lb_del() {
	local family=$1 proto=$2 port=$3 flag f
	flag=$(ipvs_proto_flag "$proto")
	lb_family "$family"
	f=$state/lb.health$lb_suffix-$proto-$port.pid
	if [[ -f $f ]]; then
		kill "$(<"$f")" 2>/dev/null || true
		rm -f "$f"
	fi
	in_ns lb ipvsadm -D "$flag" "$lb_vip:$port"
}

cmd_down() {
	local f ns
	if [[ -d $state ]]; then
		for f in "$state"/*.pid; do
			[[ -e $f ]] || continue
			kill "$(<"$f")" 2>/dev/null || true
		done
		if [[ -f $state/pods ]]; then
			while read -r ns _; do ip netns del "$ns" 2>/dev/null || true; done <"$state/pods"
		fi
		if [[ -f $state/host-route ]]; then
			iptables -t nat -D POSTROUTING -s 198.51.100.0/24 -d "$(<"$state/host-route")/32" -o eth0 \
				-m comment --comment e2e-topology -j MASQUERADE 2>/dev/null || true
		fi
		if [[ -f $state/api-vip ]]; then
			E2E_API_VIP=$(<"$state/api-vip") E2E_HOST_ADDR=$(<"$state/host-route") api_vip_rules -D 2>/dev/null || true
		fi
	fi
	for ns in "${nodes[@]}" client lb; do
		ip netns del "$ns" 2>/dev/null || true
	done
	ip link del "$bridge" 2>/dev/null || true
	rm -rf "$state"
	echo "topology: down"
}

main() {
	(($#)) || die "usage: $0 up|down|add-pod|del-pod|echo|lb-add|lb-del|lb6-add|lb6-del|exec ..."
	[[ $(id -u) == 0 ]] || die "must run as root (inside the VM)"
	local cmd=$1
	shift
	case $cmd in
	up) cmd_up ;;
	down) cmd_down ;;
	add-pod) cmd_add_pod "$@" ;;
	del-pod) cmd_del_pod "$@" ;;
	echo) cmd_echo "$@" ;;
	lb-add) cmd_lb_add 4 "$@" ;;
	lb-del) cmd_lb_del 4 "$@" ;;
	lb6-add) cmd_lb_add 6 "$@" ;;
	lb6-del) cmd_lb_del 6 "$@" ;;
	exec) in_ns "$@" ;;
	*) die "unknown command $cmd" ;;
	esac
}

main "$@"
