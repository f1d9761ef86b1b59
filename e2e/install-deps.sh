#!/usr/bin/env bash
# install-deps.sh — install the Debian packages the tests and the demo use, once.
# Idempotent and quiet when everything is there. Needs root (CI and the dev
# machines run as root).
set -euo pipefail

packages=(
	iptables ipset conntrack ipvsadm iproute2 kmod # the kernel tools the tests cross-check with
	nftables                                        # nft: kube-proxy's nftables-mode tables in the clean-up tests
	qemu-system-x86 busybox-static cpio xz-utils zstd # the end-to-end VM
	socat curl                                      # the VM's API server forward; probes; SCTP (sctp)
	qemu-user-static                                # check-rootfs.sh runs the arm64 image's tools
	prometheus                                      # promtool: the shipped alerts and dashboard (deploy/monitoring)
	iperf3 jq                                       # the data-plane benchmark's established flow; the benchmarks' JSON
)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	echo "install-deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! command -v go >/dev/null && [ ! -x /usr/local/go/bin/go ]; then
	echo "install-deps: Go not found; this project expects Go 1.26 at /usr/local/go" >&2
	exit 1
fi
