#!/usr/bin/env bash
# kernel-limits.sh — one VM boot: `ipvsproxy run` on a kernel without ip_vs, without the dummy
# driver and without the twos scheduler (kernel-limits-guest.sh; docs/compatibility.md, "Kernels").
# IPVSPROXY_VM_KERNEL chooses the kernel (prepare.sh). Needs bin/ipvsproxy (make build).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
[[ -x $repo/bin/ipvsproxy ]] || make -C "$repo" build >&2
exec "$here/run.sh" --timeout "${IPVSPROXY_VM_TIMEOUT:-600}" -- "$here/kernel-limits-guest.sh"
