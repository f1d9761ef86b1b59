# The ipvsproxy image: a static Go binary on a root file system of Debian
# packages (iptables in both back ends, kmod) and nothing else, not even a
# shell. The file tree is made by deploy/rootfs/build-rootfs.sh, the same
# script `make rootfs` runs without a container engine, so what
# deploy/rootfs/check-rootfs.sh checks there is what this image holds.
#
#   make image REGISTRY=registry.example.com/you          (this machine's platform, loaded)
#   make release REGISTRY=registry.example.com/you        (linux/amd64 and linux/arm64, pushed)
#
# The Go binary is cross-compiled on the build platform; the Debian packages
# come from the target platform's stage (emulated by buildx when it differs).

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static: the binary must not depend on the image's libc, only the iptables
# tools it runs do. The version is what `ipvsproxy version` and
# kubernetes_build_info report.
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
    -tags urfave_cli_no_docs -ldflags="-s -w -X main.version=$VERSION" -o /out/ipvsproxy ./cmd/ipvsproxy

# The release the packages come from; the rootfs tarball built outside a
# container comes from the build host's release, so keep them the same.
FROM debian:bookworm-slim AS rootfs
RUN apt-get update
COPY deploy/rootfs/build-rootfs.sh /usr/local/bin/build-rootfs.sh
COPY --from=build /out/ipvsproxy /out/ipvsproxy
RUN IPVSPROXY_DEB_CACHE=/var/cache/debs \
    build-rootfs.sh --binary /out/ipvsproxy --staging /rootfs /rootfs.tar

FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="ipvsproxy" \
      org.opencontainers.image.description="Kubernetes service proxy on IPVS, replacing kube-proxy" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION" \
      org.opencontainers.image.created="$CREATED" \
      org.opencontainers.image.source="https://github.com/ipvsproxy/ipvsproxy"
COPY --from=rootfs /rootfs/ /
ENTRYPOINT ["/usr/local/bin/ipvsproxy"]
CMD ["run"]
