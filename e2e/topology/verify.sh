#!/usr/bin/env bash
# verify.sh — on the host: build the echo server, start a stand-in for the API server on this
# machine's loopback (socat answering one line over HTTP), boot the VM with the restricted NIC
# forwarding to it, and run verify-guest.sh there. Exit status: verify-guest.sh's.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${IPVSPROXY_E2E_CACHE:-/var/cache/ipvsproxy-e2e}
go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
host_port=${E2E_HOST_PORT:-18443}

"$repo/e2e/vm/prepare.sh"
# Under the cache, not /tmp: the guest sees the host root but mounts its own /tmp.
mkdir -p "$cache/bin"
(cd "$repo" && CGO_ENABLED=0 "$go" build -o "$cache/bin/echoserver" ./e2e/echoserver)

# The reply lives in a file because socat's address syntax reserves ':' and ','.
reply=$(mktemp)
printf 'HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhost-loopback-ok\n' >"$reply"
socat "TCP-LISTEN:$host_port,bind=127.0.0.1,fork,reuseaddr" "SYSTEM:cat $reply" &
socat_pid=$!
trap 'kill $socat_pid 2>/dev/null || true; rm -f "$reply"' EXIT

IPVSPROXY_VM_PREPARED=1 "$repo/e2e/vm/run.sh" --host-port "$host_port" \
	-e "ECHOSERVER=$cache/bin/echoserver" -e "E2E_HOST_PORT=$host_port" -- "$here/verify-guest.sh"
