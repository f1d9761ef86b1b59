// Package sbom writes the software bill of materials of ipvsproxy's image
// in CycloneDX (github.com/CycloneDX/cyclonedx-go): for every platform of
// the image, the Go modules linked into its ipvsproxy binary (from the
// build information Go records in the binary) and the Debian packages of
// its root file system (the list build-rootfs.sh writes into it). The
// document is a function of its inputs: its time is the commit's and its
// serial number is derived from the image's digest.
package sbom

import (
	"bufio"
	"crypto/sha256"
	"debug/buildinfo"
	"fmt"
	"io"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// Input is what the bill of materials describes.
type Input struct {
	// Name and Version of the image (ipvsproxy, 0.1.0).
	Name, Version string
	// Digest is the image index's digest (sha256:...).
	Digest string
	// Created is the commit's time.
	Created time.Time
	// Distro is the Debian release the packages come from, as purl's
	// distro qualifier writes it (debian-12).
	Distro    string
	Platforms []Platform
}

// Platform is one image of the index: what its binary links and what its
// root file system holds.
type Platform struct {
	Name     string // linux/arm64
	Binary   *buildinfo.BuildInfo
	Packages []DebPackage
}

// DebPackage is one line of build-rootfs.sh's packages.txt.
type DebPackage struct {
	Name, Version, Arch string
}

// ReadPackages reads build-rootfs.sh's packages.txt: "NAME VERSION ARCH" per line.
func ReadPackages(r io.Reader) ([]DebPackage, error) {
	var pkgs []DebPackage
	s := bufio.NewScanner(r)
	for n := 1; s.Scan(); n++ {
		f := strings.Fields(s.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("packages line %d %q: want NAME VERSION ARCH", n, s.Text())
		}
		pkgs = append(pkgs, DebPackage{Name: f[0], Version: f[1], Arch: f[2]})
	}
	return pkgs, s.Err()
}

// ReadBinary reads the build information of a Go binary.
func ReadBinary(r io.ReaderAt) (*buildinfo.BuildInfo, error) {
	return buildinfo.Read(r)
}

// Build makes the bill of materials. A Go module linked on several
// platforms is one component; a Debian package is one per architecture
// (its purl names the architecture).
func Build(in Input) (*cdx.BOM, error) {
	if in.Name == "" || in.Version == "" || in.Digest == "" || in.Created.IsZero() || len(in.Platforms) == 0 {
		return nil, fmt.Errorf("sbom input without name, version, digest, time or platforms")
	}
	bom := cdx.NewBOM()
	bom.SerialNumber = serialNumber(in)
	bom.Version = 1
	imageRef := "image"
	bom.Metadata = &cdx.Metadata{
		Timestamp: in.Created.UTC().Format(time.RFC3339),
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{
			Type: cdx.ComponentTypeApplication, Name: "ipvsproxy-release",
			Description: "release/cmd/ipvsproxy-release of the ipvsproxy repository, with github.com/CycloneDX/cyclonedx-go",
		}}},
		Component: &cdx.Component{
			BOMRef:     imageRef,
			Type:       cdx.ComponentTypeContainer,
			Name:       in.Name,
			Version:    in.Version,
			PackageURL: "pkg:oci/" + in.Name + "@" + url.PathEscape(in.Digest),
			Hashes:     hashOf(in.Digest),
		},
	}

	components := map[string]*cdx.Component{}
	deps := map[string][]string{}
	platformsOf := map[string][]string{}
	add := func(c cdx.Component, platform string) string {
		if _, ok := components[c.BOMRef]; !ok {
			c := c
			components[c.BOMRef] = &c
		}
		if !slices.Contains(platformsOf[c.BOMRef], platform) {
			platformsOf[c.BOMRef] = append(platformsOf[c.BOMRef], platform)
		}
		return c.BOMRef
	}
	for _, p := range in.Platforms {
		if p.Binary == nil {
			return nil, fmt.Errorf("platform %s without the binary's build information", p.Name)
		}
		main := p.Binary.Main
		binRef := add(cdx.Component{
			BOMRef:     golangPURL(main.Path, in.Version),
			Type:       cdx.ComponentTypeApplication,
			Name:       main.Path,
			Version:    in.Version,
			PackageURL: golangPURL(main.Path, in.Version),
			Properties: buildSettings(p.Binary),
		}, p.Name)
		deps[imageRef] = appendNew(deps[imageRef], binRef)
		std := add(cdx.Component{
			BOMRef:     "pkg:golang/stdlib@" + strings.TrimPrefix(p.Binary.GoVersion, "go"),
			Type:       cdx.ComponentTypeLibrary,
			Name:       "stdlib",
			Version:    p.Binary.GoVersion,
			PackageURL: "pkg:golang/stdlib@" + strings.TrimPrefix(p.Binary.GoVersion, "go"),
		}, p.Name)
		deps[binRef] = appendNew(deps[binRef], std)
		for _, m := range p.Binary.Deps {
			if m.Replace != nil {
				m = m.Replace
			}
			purl := golangPURL(m.Path, m.Version)
			c := cdx.Component{BOMRef: purl, Type: cdx.ComponentTypeLibrary, Name: m.Path, Version: m.Version, PackageURL: purl}
			if m.Sum != "" {
				c.Properties = &[]cdx.Property{{Name: "go.sum", Value: m.Sum}}
			}
			deps[binRef] = appendNew(deps[binRef], add(c, p.Name))
		}
		for _, d := range p.Packages {
			q := url.Values{"arch": {d.Arch}}
			if in.Distro != "" {
				q.Set("distro", in.Distro)
			}
			purl := "pkg:deb/debian/" + d.Name + "@" + escapeVersion(d.Version) + "?" + q.Encode()
			deps[imageRef] = appendNew(deps[imageRef], add(cdx.Component{
				BOMRef: purl, Type: cdx.ComponentTypeLibrary, Name: d.Name, Version: d.Version,
				Publisher: "Debian", PackageURL: purl,
			}, p.Name))
		}
	}

	refs := make([]string, 0, len(components))
	for r := range components {
		refs = append(refs, r)
	}
	sort.Strings(refs)
	list := make([]cdx.Component, 0, len(refs))
	for _, r := range refs {
		c := *components[r]
		props := []cdx.Property{}
		if c.Properties != nil {
			props = append(props, *c.Properties...)
		}
		for _, p := range platformsOf[r] {
			props = append(props, cdx.Property{Name: "ipvsproxy:platform", Value: p})
		}
		c.Properties = &props
		list = append(list, c)
	}
	bom.Components = &list

	var dependencies []cdx.Dependency
	for _, r := range append([]string{imageRef}, refs...) {
		if on, ok := deps[r]; ok {
			sort.Strings(on)
			dependencies = append(dependencies, cdx.Dependency{Ref: r, Dependencies: &on})
		}
	}
	bom.Dependencies = &dependencies
	return bom, nil
}

// Encode writes bom as CycloneDX 1.6 JSON.
func Encode(w io.Writer, bom *cdx.BOM) error {
	enc := cdx.NewBOMEncoder(w, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	return enc.EncodeVersion(bom, cdx.SpecVersion1_6)
}

func golangPURL(path, version string) string {
	return "pkg:golang/" + path + "@" + escapeVersion(version)
}

// escapeVersion percent-encodes a purl version: "+" too, which a URL path
// may hold but purl reserves (Debian's "2.36-9+deb12u10").
func escapeVersion(v string) string {
	return strings.ReplaceAll(url.PathEscape(v), "+", "%2B")
}

func hashOf(digest string) *[]cdx.Hash {
	alg, hex, ok := strings.Cut(digest, ":")
	if !ok || alg != "sha256" {
		return nil
	}
	return &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: hex}}
}

// buildSettings are the binary's build flags (-tags, -ldflags, GOARCH...),
// so that the bill says how it was built.
func buildSettings(bi *buildinfo.BuildInfo) *[]cdx.Property {
	props := []cdx.Property{{Name: "go:version", Value: bi.GoVersion}}
	for _, s := range bi.Settings {
		props = append(props, cdx.Property{Name: "go:build:" + s.Key, Value: s.Value})
	}
	return &props
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// serialNumber is a UUID (RFC 9562 version 8, content-derived) from the
// image's name, version and digest: the same image gets the same serial.
func serialNumber(in Input) string {
	sum := sha256.Sum256([]byte(in.Name + "\x00" + in.Version + "\x00" + in.Digest))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x80
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("urn:uuid:%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
