#!/usr/bin/env bash
# Writes the image archives the conformance cluster runs (nothing can be pulled here) with
# mkimage, under the names the e2e framework asks for: each tag is read from
# test/utils/image/manifest.go of the k8s.io/kubernetes this module's go.mod requires, so the
# names follow the Kubernetes release without an edit here.
#   registry.k8s.io/pause                       the sandbox image (this module's cmd/pause)
#   registry.k8s.io/e2e-test-images/agnhost     agnhost built from test/images/agnhost, plus
#       what its Dockerfile adds from Alpine, taken from this Debian machine with their shared
#       libraries: curl, nc (netcat-openbsd), ss and ip (iproute2), bash, dash as /bin/sh;
#       busybox for the rest
#       (Debian's wget instead of busybox's, whose -T segfaults in 1.35)
#   registry.k8s.io/e2e-test-images/busybox     Debian's static busybox (1.35) with its applets
#   registry.k8s.io/build-image/distroless-iptables   Debian's conntrack with its libraries,
#       busybox for sh, grep and sleep (the KubeProxy CLOSE_WAIT spec reads the node's table)
#   registry.k8s.io/e2e-test-images/regression-issue-74839   built from test/images (build.sh)
#   registry.invalid/ipvsproxy:VERSION                 the release's image archive (make image), as it is
#
# Usage: images.sh BIN_DIR IMAGE_ARCHIVE OUT_DIR    (BIN_DIR from build.sh)
set -euo pipefail
bin=$1 ipvsproxy_archive=$2 out=$3
mkdir -p "$out"
log() { echo "images.sh: $*" >&2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}

# tag_of NAME: the tag the e2e framework of this module's Kubernetes asks for, from its
# manifest's line `configs[NAME] = Config{registry, "image", "tag"}`.
manifest=$(cd "$here" && "$GO" list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/utils/image/manifest.go
tag_of() {
	local t
	t=$(awk -v n="configs[$1]" '$1 == n { gsub(/[",}]/, "", $NF); print $NF }' "$manifest")
	[[ -n $t ]] || { log "no configs[$1] in $manifest"; exit 1; }
	echo "$t"
}
declare -A tag
for n in Pause BusyBox Agnhost DistrolessIptables RegressionIssue74839; do tag[$n]=$(tag_of "$n"); done

# Debian binaries copied into the agnhost image, and the shared libraries they load.
debian_tools=(/usr/bin/curl /usr/bin/nc.openbsd /usr/bin/ss /usr/bin/ip /usr/bin/bash /usr/bin/dash /usr/bin/wget)
for t in "${debian_tools[@]}" /usr/sbin/conntrack; do [[ -x $t ]] || { log "$t missing (apt-get install curl netcat-openbsd iproute2 wget conntrack)"; exit 1; }; done
lib_args_of() { # -add arguments for the shared libraries the binaries load
	local l
	for l in $(ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\/.*ld-linux/ { print $1 }' | sort -u); do
		printf -- '-add\n%s=%s\n' "$(readlink -f "$l")" "$l"
	done
}
mapfile -t lib_args < <(lib_args_of "${debian_tools[@]}")
mapfile -t conntrack_lib_args < <(lib_args_of /usr/sbin/conntrack)

busybox_links() { # busybox applets as links in DIR, except the names in $2
	local dir=$1 except=" busybox $2 " a
	for a in $(busybox --list); do
		[[ $except == *" $a "* ]] || printf -- '-symlink\n%s/%s=/bin/busybox\n' "$dir" "$a"
	done
}
mapfile -t bb_links < <(busybox_links /bin "")
# In agnhost, /bin/sh is Debian's dash: Debian's busybox shell runs its own applets before PATH
# (FEATURE_SH_STANDALONE), so `nc -v -t -w 2` in a test would reach busybox's nc, which has none
# of those options, instead of netcat-openbsd as in upstream's Alpine-based image.
mapfile -t agnhost_bb_links < <(busybox_links /bin "sh ash nc ip wget")

start=$SECONDS
"$bin/mkimage" -o "$out/pause.tar" -tag "registry.k8s.io/pause:${tag[Pause]}" \
	-add "$bin/pause=/pause" -entrypoint /pause
"$bin/mkimage" -o "$out/busybox.tar" -tag "registry.k8s.io/e2e-test-images/busybox:${tag[BusyBox]}" \
	-add /bin/busybox=/bin/busybox "${bb_links[@]}" -dir /tmp=1777 -cmd sh
"$bin/mkimage" -o "$out/agnhost.tar" -tag "registry.k8s.io/e2e-test-images/agnhost:${tag[Agnhost]}" \
	-add "$bin/agnhost=/agnhost" -symlink /agnhost-2=agnhost \
	-add /bin/busybox=/bin/busybox "${agnhost_bb_links[@]}" -add /usr/bin/dash=/bin/sh \
	-add /usr/bin/curl=/usr/bin/curl -add /usr/bin/nc.openbsd=/usr/bin/nc -add /usr/bin/ss=/usr/bin/ss \
	-add /usr/bin/ip=/usr/bin/ip -add /usr/bin/bash=/usr/bin/bash -symlink /usr/local/bin/bash=/usr/bin/bash \
	-add /usr/bin/wget=/usr/bin/wget \
	"${lib_args[@]}" -dir /tmp=1777 -dir /uploads -entrypoint /agnhost -cmd pause
"$bin/mkimage" -o "$out/distroless-iptables.tar" -tag "registry.k8s.io/build-image/distroless-iptables:${tag[DistrolessIptables]}" \
	-add /bin/busybox=/bin/busybox "${bb_links[@]}" -add /usr/sbin/conntrack=/usr/sbin/conntrack \
	"${conntrack_lib_args[@]}" -dir /tmp=1777
"$bin/mkimage" -o "$out/regression-issue-74839.tar" -tag "registry.k8s.io/e2e-test-images/regression-issue-74839:${tag[RegressionIssue74839]}" \
	-add "$bin/regression-issue-74839=/regression-issue-74839" -entrypoint /regression-issue-74839
cp "$ipvsproxy_archive" "$out/ipvsproxy.tar"
cp "$(dirname "$ipvsproxy_archive")/IMAGE" "$out/ipvsproxy.ref" # REPOSITORY:TAG@DIGEST, for node.sh
log "wrote $(ls "$out" | tr '\n' ' ')in $((SECONDS - start))s ($(du -sh "$out" | cut -f1))"
