#!/bin/sh
# Builds the ipvsproxy container's root file system as a tarball, from Debian
# packages only, without a container engine: the static ipvsproxy binary plus
# the tools it runs on the host's behalf (iptables-restore/-save in both the
# nft and legacy back ends, modprobe from kmod) and their shared libraries.
# The image (`make image`, release/image) is this tarball as its one layer,
# so the tree check-rootfs.sh inspects is the image's.
#
# usage: build-rootfs.sh [--arch ARCH] [--binary PATH] [--staging DIR] OUTPUT.tar
#        build-rootfs.sh [--staging DIR] BINARY OUTPUT.tar
#   --arch     Debian architecture of the tree (amd64, arm64, ...); default:
#              this machine's (dpkg --print-architecture)
#   --binary   a static ipvsproxy binary; default: CGO_ENABLED=0 GOARCH=ARCH go build ./cmd/ipvsproxy
#   --staging  build the tree in DIR and keep it (default: a temporary directory)
# env: IPVSPROXY_DEB_CACHE   where downloaded .debs are kept between runs
#                            (default: <repo>/_output/rootfs-debs)
#      SOURCE_DATE_EPOCH     mtime of every file in the tarball (default 0)
#
# Needs apt-get, apt-cache and dpkg-deb (Debian's apt and dpkg). Packages come
# from the host's configured Debian release (its apt sources); run it on the
# release the image is meant for. This machine's architecture uses the
# host's package lists (from `apt-get update`); another architecture gets
# package lists of its own, fetched from the same sources into
# <cache>/apt-ARCH by apt-get update with that apt state, so the host's dpkg
# configuration (`dpkg --add-architecture`) is left alone.
set -eu

# The packages the daemon runs, plus what they link against. apt-cache
# resolves the closure; recommends and suggests are left out.
PACKAGES="iptables kmod"
BIN_PATH=/usr/local/bin/ipvsproxy

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
usage="usage: build-rootfs.sh [--arch ARCH] [--binary PATH] [--staging DIR] OUTPUT.tar, or [--staging DIR] BINARY OUTPUT.tar"
binary= staging= output= arch=
set_positional() {
	if [ -z "$output" ]; then
		output=$1
	elif [ -z "$binary" ]; then
		# Two positional arguments: BINARY OUTPUT.tar.
		binary=$output output=$1
	else
		echo "$usage" >&2
		exit 2
	fi
}
while [ $# -gt 0 ]; do
	case $1 in
	--arch) arch=$2; shift 2 ;;
	--binary) binary=$2; shift 2 ;;
	--staging) staging=$2; shift 2 ;;
	-h|--help) sed -n '2,29p' "$0"; exit 0 ;;
	-*) echo "build-rootfs: unknown option $1" >&2; exit 2 ;;
	*) set_positional "$1"; shift ;;
	esac
done
[ -n "$output" ] || { echo "$usage" >&2; exit 2; }
case $output in /*) ;; *) output=$PWD/$output ;; esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "$staging" ]; then
	staging=$work/rootfs
fi
case $staging in /*) ;; *) staging=$PWD/$staging ;; esac
rm -rf "$staging"
mkdir -p "$staging"

host_arch=$(dpkg --print-architecture)
[ -n "$arch" ] || arch=$host_arch
case $arch in
amd64|arm64|ppc64el|s390x|riscv64) goarch=$(echo "$arch" | sed 's/ppc64el/ppc64le/') ;;
*) echo "build-rootfs: architecture $arch: not one Go and Debian both build for (amd64, arm64, ppc64el, s390x, riscv64)" >&2; exit 2 ;;
esac

if [ -z "$binary" ]; then
	binary=$work/ipvsproxy
	echo "build-rootfs: building ./cmd/ipvsproxy (static, linux/$goarch)" >&2
	(cd "$repo" && CGO_ENABLED=0 GOOS=linux GOARCH=$goarch go build -trimpath -tags urfave_cli_no_docs -ldflags="-s -w" -o "$binary" ./cmd/ipvsproxy)
fi
[ -x "$binary" ] || { echo "build-rootfs: $binary is not an executable" >&2; exit 1; }

cache=${IPVSPROXY_DEB_CACHE:-$repo/_output/rootfs-debs}
mkdir -p "$cache"

# apt for the tree's architecture. Another architecture's package lists live in an apt state of
# their own, refreshed at each run (a list older than the archive names .debs it no longer has).
apt_opts=
if [ "$arch" != "$host_arch" ]; then
	state=$cache/apt-$arch
	mkdir -p "$state/lists/partial" "$state/archives/partial" "$state/sources.list.d" "$state/preferences.d"
	: >"$state/status"
	rm -f "$state"/sources.list.d/*
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		if [ -f "$f" ]; then cp "$f" "$state/sources.list.d/host-$(basename "$f")"; fi
	done
	apt_opts="-o APT::Architecture=$arch -o APT::Architectures::=$arch -o Dir::State::Lists=$state/lists
		-o Dir::State::status=$state/status -o Dir::Cache=$state -o Dir::Cache::archives=$state/archives
		-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=$state/sources.list.d
		-o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=$state/preferences.d"
	echo "build-rootfs: apt-get update for $arch in $state" >&2
	# As root, apt would warn that its _apt sandbox user cannot write the state.
	apt-get $apt_opts -o APT::Sandbox::User=root -q update >"$state/update.log" 2>&1 ||
		{ cat "$state/update.log" >&2; echo "build-rootfs: apt-get update for $arch failed" >&2; exit 1; }
fi

# Every real package in the dependency closure (virtual ones print as <name>).
closure=$(apt-cache $apt_opts depends --recurse --no-recommends --no-suggests \
	--no-conflicts --no-breaks --no-replaces --no-enhances $PACKAGES |
	grep -E '^[a-z0-9]' | sort -u)
[ -n "$closure" ] || { echo "build-rootfs: apt-cache knows none of: $PACKAGES for $arch (run apt-get update)" >&2; exit 1; }

manifest=$work/packages.txt
: >"$manifest"
for pkg in $closure; do
	version=$(apt-cache $apt_opts policy "$pkg" | awk '/Candidate:/ {print $2}')
	if [ -z "$version" ] || [ "$version" = "(none)" ]; then
		echo "build-rootfs: no installable version of $pkg (run apt-get update)" >&2
		exit 1
	fi
	# apt-get download names files with the epoch's colon escaped as %3a.
	# A package of the tree's architecture, or one for all (_all.deb).
	debs() { ls "$cache/${pkg}_$(echo "$version" | sed 's/:/%3a/')_$arch.deb" "$cache/${pkg}_$(echo "$version" | sed 's/:/%3a/')_all.deb" 2>/dev/null | head -n 1 || true; }
	deb=$(debs)
	if [ -z "$deb" ]; then
		# As root, apt would warn that its _apt sandbox user cannot write the cache.
		(cd "$cache" && apt-get $apt_opts download -q -o APT::Sandbox::User=root "$pkg=$version" >&2)
		deb=$(debs)
		[ -n "$deb" ] || { echo "build-rootfs: apt-get download $pkg=$version left no $arch or all .deb in $cache" >&2; exit 1; }
	fi
	[ "$(dpkg-deb -f "$deb" Architecture)" = "$arch" ] || [ "$(dpkg-deb -f "$deb" Architecture)" = all ] ||
		{ echo "build-rootfs: $deb is not for $arch" >&2; exit 1; }
	dpkg-deb -x "$deb" "$staging"
	echo "$pkg $version $(dpkg-deb -f "$deb" Architecture)" >>"$manifest"
done

# Debian's postinst scripts, which dpkg-deb -x does not run, choose the
# default iptables back end with update-alternatives (nft, priority 20 over
# legacy's 10). Make the same choice with plain symlinks; ipvsproxy itself
# calls iptables-nft-* or iptables-legacy-* after detecting what the host uses.
for tool in iptables iptables-restore iptables-save ip6tables ip6tables-restore ip6tables-save; do
	nft=$(echo "$tool" | sed 's/^\(ip6\{0,1\}tables\)/\1-nft/')
	[ -e "$staging/usr/sbin/$nft" ] || { echo "build-rootfs: $nft missing from the iptables package" >&2; exit 1; }
	ln -sf "$nft" "$staging/usr/sbin/$tool"
done

install -D -m 0755 "$binary" "$staging$BIN_PATH"
install -D -m 0644 "$manifest" "$staging/usr/share/doc/ipvsproxy/packages.txt"
# /run holds the xtables lock (a hostPath in the DaemonSet); /tmp for tools.
# /lib/modules is where deploy/overlays/modprobe mounts the host's modules.
mkdir -p "$staging/run" "$staging/tmp" "$staging/etc" "$staging/lib/modules"
chmod 1777 "$staging/tmp"
# Not needed at run time: manual pages, shell completion, boot scripts, and
# glibc's iconv modules (8 MB; neither iptables nor kmod converts charsets).
# /usr/share/doc stays: it holds the packages' copyright files.
rm -rf "$staging/usr/share/man" "$staging/usr/share/info" "$staging/usr/share/lintian" \
	"$staging/usr/share/bash-completion" "$staging/usr/share/initramfs-tools" \
	"$staging/etc/init.d" "$staging"/usr/lib/*-linux-gnu/gconv

mkdir -p "$(dirname "$output")"
tar --sort=name --mtime="@${SOURCE_DATE_EPOCH:-0}" --numeric-owner --owner=0 --group=0 \
	-C "$staging" -cf "$output" .
echo "build-rootfs: wrote $output for $arch ($(wc -l <"$manifest") packages: $(awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2 }' "$manifest"))" >&2
