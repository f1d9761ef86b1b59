#!/usr/bin/env bash
# image.sh — `make image`: ipvsproxy's image for every platform, without a container engine.
# For each platform: the daemon cross-compiled (static, CGO_ENABLED=0) with the Makefile's flags,
# deploy/rootfs/build-rootfs.sh's tree of Debian packages of that architecture around it,
# deploy/rootfs/check-rootfs.sh run on the tree (under qemu's user mode for another
# architecture); then release/cmd/ipvsproxy-release gathers the trees as one OCI image index with
# the OCI labels, the commit's time everywhere, into one OCI archive. The same commit builds the
# same digest (release/image's tests; `make release` twice).
#
# usage: release/image.sh OUT_DIR
# env (set by the Makefile): GO, VERSION, COMMIT, TREE_STATE, SOURCE_DATE_EPOCH, LDFLAGS, BUILDTAGS,
#      IMAGE (the repository the archive names), PLATFORMS (linux/amd64,linux/arm64);
#      IMAGE_REUSE=1 keeps OUT_DIR's archive when it was built from the same inputs (the commit,
#      every change to the tree, the settings above): the end-to-end and conformance runs.
# Writes OUT_DIR/ipvsproxy-VERSION.oci.tar, OUT_DIR/IMAGE (REPOSITORY:VERSION@DIGEST) and, per
# platform, OUT_DIR/linux-ARCH/{ipvsproxy,rootfs.tar}.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
out=${1:?usage: image.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
: "${GO:=go}" "${VERSION:?}" "${COMMIT:?}" "${TREE_STATE:?}" "${SOURCE_DATE_EPOCH:?}" "${LDFLAGS:?}" "${BUILDTAGS:?}"
: "${IMAGE:=registry.invalid/ipvsproxy}" "${PLATFORMS:=linux/amd64,linux/arm64}"
export SOURCE_DATE_EPOCH
revision=$COMMIT
[[ $TREE_STATE == clean ]] || revision+=-dirty
log() { echo "image: $*" >&2; }

# What the archive is made from: the commit, the tree's changes (tracked and untracked), the
# settings. The same inputs make the same archive, so a run that finds one of them may keep it.
inputs=$( (
	cd "$repo"
	echo "$VERSION $COMMIT $TREE_STATE $SOURCE_DATE_EPOCH $LDFLAGS $BUILDTAGS $IMAGE $PLATFORMS"
	git diff HEAD --binary 2>/dev/null
	git ls-files -o --exclude-standard -z 2>/dev/null | xargs -0 -r sha256sum
) | sha256sum | cut -c1-64)
if [[ ${IMAGE_REUSE:-} == 1 && -f $out/INPUTS && $(cat "$out/INPUTS") == "$inputs" && -f $out/IMAGE &&
	-x $out/ipvsproxy-release ]] && ls "$out"/ipvsproxy-*.oci.tar >/dev/null 2>&1; then
	log "kept $(cat "$out/IMAGE"): built from the same inputs"
	exit 0
fi
rm -f "$out"/ipvsproxy-*.oci.tar "$out/IMAGE" "$out/INPUTS"

args=()
for platform in ${PLATFORMS//,/ }; do
	arch=${platform#linux/}
	[[ $platform == linux/* && $arch != */* ]] || { log "platform $platform: want linux/ARCH"; exit 2; }
	dir=$out/linux-$arch
	mkdir -p "$dir"
	log "$platform: go build"
	(cd "$repo" && CGO_ENABLED=0 GOOS=linux GOARCH=$arch "$GO" build -trimpath -tags "$BUILDTAGS" \
		-ldflags "$LDFLAGS" -o "$dir/ipvsproxy" ./cmd/ipvsproxy)
	"$repo/deploy/rootfs/build-rootfs.sh" --arch "$arch" --binary "$dir/ipvsproxy" "$dir/rootfs.tar"
	rc=0
	"$repo/deploy/rootfs/check-rootfs.sh" --arch "$arch" "$dir/rootfs.tar" >"$dir/check-rootfs.log" 2>&1 || rc=$?
	case $rc in
	0) log "$platform: check-rootfs passed ($(grep -c '^ok' "$dir/check-rootfs.log") checks)" ;;
	77) log "$platform: NOT CHECKED: check-rootfs needs root or user namespaces ($(tail -n 1 "$dir/check-rootfs.log"))" ;;
	*) cat "$dir/check-rootfs.log" >&2; log "$platform: check-rootfs FAILED"; exit 1 ;;
	esac
	args+=("$platform=$dir/rootfs.tar")
done
(cd "$here" && CGO_ENABLED=0 "$GO" build -trimpath -o "$out/ipvsproxy-release" ./cmd/ipvsproxy-release)
archive=$out/ipvsproxy-$VERSION.oci.tar
ref=$("$out/ipvsproxy-release" image -name "$IMAGE" -version "$VERSION" -revision "$revision" \
	-created "$SOURCE_DATE_EPOCH" -o "$archive" "${args[@]}")
echo "$ref" >"$out/IMAGE"
echo "$inputs" >"$out/INPUTS"
log "wrote $archive: $ref"
