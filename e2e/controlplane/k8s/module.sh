#!/usr/bin/env bash
# module.sh VERSION — writes k8s/MINOR/go.mod and go.sum: the module graph from which build.sh
# builds an older Kubernetes release's kube-apiserver and etcd for the Kubernetes matrix
# (IPVSPROXY_E2E_K8S=MINOR; docs/compatibility.md). The newest release is e2e/controlplane's own
# go.mod; the older ones differ only in the release k8s.io/kubernetes is required at, its staging
# modules' published versions (v0.MINOR.PATCH) and what `go mod tidy` derives from that.
#
#   e2e/controlplane/k8s/module.sh v1.35.4
#
# Rerun it to move a minor to a newer patch release; commit both files.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
version=${1:?usage: module.sh vMAJOR.MINOR.PATCH}
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "module.sh: want v1.MINOR.PATCH, got $version" >&2; exit 2; }
minor=1.${BASH_REMATCH[1]} staging=v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}

work=$(mktemp -d)
trap 'rm -rf -- "$work"' EXIT
# The same programs as the newest release's (build.sh copies them in the same way).
for cmd in kube-apiserver etcd kube-proxy; do
	mkdir -p "$work/cmd/$cmd"
	cp "$here/../cmd/$cmd/main.go" "$work/cmd/$cmd/"
done
# The staging modules the release itself points at ./staging, from its own go.mod.
kmod=$(cd "$work" && "$GO" mod download -json "k8s.io/kubernetes@$version" | awk -F'"' '$2 == "GoMod" { print $4 }')
mapfile -t staged < <(awk '$2 == "=>" && $3 ~ /^\.\/staging\// { print $1 }' "$kmod" | grep -vx k8s.io/sample-cli-plugin)
{
	echo "module github.com/ipvsproxy/ipvsproxy/e2e/controlplane/k8s/$minor"
	echo
	echo "go 1.26.0"
	echo
	echo "require k8s.io/kubernetes $version"
	echo
	echo "// k8s.io/kubernetes points its staging modules at ./staging; outside its own repository they"
	echo "// come from the published $staging releases (k8s.io/sample-cli-plugin is left out: the"
	echo "// module proxy refuses it and nothing built here imports it)."
	echo "replace ("
	for m in "${staged[@]}"; do printf '\t%s => %s %s\n' "$m" "$m" "$staging"; done
	echo ")"
} >"$work/go.mod"
(cd "$work" && "$GO" mod tidy)
mkdir -p "$here/$minor"
cp "$work/go.mod" "$work/go.sum" "$here/$minor/"
echo "module.sh: wrote $here/$minor/go.mod and go.sum (k8s.io/kubernetes $version)"
