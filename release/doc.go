// Package release documents the module that builds ipvsproxy's release
// artifacts: the container image (image), its software bill of materials
// (sbom), and the rendered manifests, packaged chart and checksums (bundle),
// driven by cmd/ipvsproxy-release from the Makefile's image, release and
// push targets. It is a module of its own so that the registry and SBOM
// libraries never enter the daemon's module graph.
package release
