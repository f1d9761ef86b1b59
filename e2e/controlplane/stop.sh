#!/usr/bin/env bash
# Stops the control plane started by start.sh and removes its work dir.
# Usage: stop.sh WORKDIR     (a dir without start.sh's marker is left alone)
set -euo pipefail

work=${1:?usage: stop.sh WORKDIR}
[[ -e $work/.ipvsproxy-e2e-controlplane ]] || { echo "stop.sh: $work was not made by start.sh; not touching it" >&2; exit 1; }

# The API server first, so it does not log etcd's disappearance at length.
for name in kube-apiserver etcd; do
	pidfile=$work/$name.pid
	[[ -e $pidfile ]] || continue
	pid=$(cat "$pidfile")
	# A stale pid may have been reused by an unrelated process: check its name.
	[[ $(cat "/proc/$pid/comm" 2>/dev/null) == "${name:0:15}" ]] || continue
	kill "$pid" 2>/dev/null || continue
	for _ in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
done
rm -rf -- "$work"
echo "stop.sh: stopped and removed $work" >&2
