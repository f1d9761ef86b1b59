# The ipvsproxy image: a static Go binary on a root file system of Debian
# packages (iptables in both back ends, kmod) and nothing else, not even a
# shell. The file tree is made by deploy/rootfs/build-rootfs.sh, the same
# script `make rootfs` runs without a container engine, so what
# deploy/rootfs/check-rootfs.sh checks there is what this image holds.
#
#   docker build -t ipvsproxy/ipvsproxy:v0.1.0 .

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static: the binary must not depend on the image's libc, only the iptables
# tools it runs do.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ipvsproxy ./cmd/ipvsproxy

# The release the packages come from; the rootfs tarball built outside a
# container comes from the build host's release, so keep them the same.
FROM debian:bookworm-slim AS rootfs
RUN apt-get update
COPY deploy/rootfs/build-rootfs.sh /usr/local/bin/build-rootfs.sh
COPY --from=build /out/ipvsproxy /out/ipvsproxy
RUN IPVSPROXY_DEB_CACHE=/var/cache/debs \
    build-rootfs.sh --binary /out/ipvsproxy --staging /rootfs /rootfs.tar

FROM scratch
COPY --from=rootfs /rootfs/ /
ENTRYPOINT ["/usr/local/bin/ipvsproxy"]
CMD ["run"]
