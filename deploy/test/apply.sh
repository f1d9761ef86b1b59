#!/bin/sh
# Server-side applies the kustomized manifests of deploy/ to a real API server
# (not a dry run), with strict field validation, and checks the
# ServiceAccount's access against docs/rbac.md. Any schema error fails.
#
# usage: deploy/test/apply.sh ADMIN-KUBECONFIG [TOKEN-KUBECONFIG-OUT]
#   TOKEN-KUBECONFIG-OUT: also write a kubeconfig holding a token of the
#   ipvsproxy ServiceAccount, for running the proxy with exactly its RBAC.
# env: RELEASE_DIR  a directory `ipvsproxy-release release` wrote (the end-to-end
#      run makes one from `make image`'s archive): its rendered manifests and its
#      packaged chart are applied too, first, and every container of theirs must
#      run its image by digest (its IMAGE file).
#
# What the README's install commands name is applied first (they are the ones
# an operator runs), then the overlays and the Helm chart (deploy/helm/ipvsproxy,
# rendered by Helm's engine in process; CHART=VALUES renders it with that
# values file), and the base last, so the cluster ends with the base's
# objects; all are checked by the server.
# Needs only Go (it runs deploy/test/apply; kubectl is not required).
set -eu
[ $# -ge 1 ] || { echo "usage: apply.sh ADMIN-KUBECONFIG [TOKEN-KUBECONFIG-OUT]" >&2; exit 2; }
kubeconfig=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
token_out=
if [ $# -ge 2 ]; then
	token_out=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
fi
cd "$(dirname "$0")/../.."
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
release=
image=
if [ -n "${RELEASE_DIR:-}" ]; then
	image=$(sed 's/:[^:@/]*@/@/' "$RELEASE_DIR/IMAGE") # REPOSITORY:TAG@DIGEST -> REPOSITORY@DIGEST
	release="$(ls "$RELEASE_DIR"/manifests/*.yaml "$RELEASE_DIR"/ipvsproxy-*.tgz | tr '\n' ' ')"
fi
# shellcheck disable=SC2086 # $release: the release's files, one word each
exec "$GO" run ./deploy/test/apply -kubeconfig "$kubeconfig" ${token_out:+-token-kubeconfig "$token_out"} ${image:+-image "$image"} \
	-install-commands README.md:install $release \
	deploy/overlays/example deploy/overlays/modprobe deploy/overlays/kube-proxy-labels deploy/overlays/kubeadm deploy/overlays/migrate \
	deploy/overlays/node-watch \
	deploy/helm/ipvsproxy=deploy/helm/ipvsproxy/ci/example-values.yaml \
	deploy/helm/ipvsproxy=deploy/helm/ipvsproxy/ci/kubeadm-values.yaml \
	deploy/helm/ipvsproxy=deploy/helm/ipvsproxy/ci/migrate-values.yaml \
	deploy/helm/ipvsproxy deploy/base
