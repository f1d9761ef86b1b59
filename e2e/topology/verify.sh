#!/usr/bin/env bash
# verify.sh — on the host: build the echo server, boot the VM and run verify-guest.sh there.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${IPVSPROXY_E2E_CACHE:-/var/cache/ipvsproxy-e2e}
go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
"$repo/e2e/vm/prepare.sh"
# Under the cache, not /tmp: the guest sees the host root but mounts its own /tmp.
mkdir -p "$cache/bin"
(cd "$repo" && CGO_ENABLED=0 "$go" build -o "$cache/bin/echoserver" ./e2e/echoserver)
IPVSPROXY_VM_PREPARED=1 exec "$repo/e2e/vm/run.sh" -e "ECHOSERVER=$cache/bin/echoserver" -- "$here/verify-guest.sh"
