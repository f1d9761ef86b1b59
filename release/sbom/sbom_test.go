package sbom

import (
	"bytes"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

const packagesTxt = `iptables 1.8.9-2 amd64
libc6 2.36-9+deb12u10 amd64
`

func testInput(t *testing.T) Input {
	t.Helper()
	// What `go version -m` prints of a binary (a test binary records no modules).
	self, err := debug.ParseBuildInfo(strings.Join([]string{
		"path\tgithub.com/ipvsproxy/ipvsproxy/cmd/ipvsproxy",
		"mod\tgithub.com/ipvsproxy/ipvsproxy\t(devel)\t",
		"dep\tgithub.com/CycloneDX/cyclonedx-go\tv0.9.3\th1:Pyk/lwavPz7AaZNvugXtPD1f7ybTxbzvc+Vv3hWkQj8=",
		"dep\tk8s.io/client-go\tv0.36.3\th1:x",
		"=>\tk8s.io/client-go\tv0.36.4\th1:y",
		"build\t-tags=urfave_cli_no_docs",
		"build\tGOARCH=amd64",
	}, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	self.GoVersion = "go1.26.8" // ParseBuildInfo leaves it to the binary's reader
	pkgs, err := ReadPackages(strings.NewReader(packagesTxt))
	if err != nil {
		t.Fatal(err)
	}
	arm := []DebPackage{{"iptables", "1.8.9-2", "arm64"}, {"tzdata", "2025b-0+deb12u1", "all"}}
	return Input{
		Name: "ipvsproxy", Version: "0.1.0", Digest: "sha256:" + strings.Repeat("ab", 32),
		Created: time.Date(2026, 12, 6, 6, 34, 51, 0, time.UTC), Distro: "debian-12",
		Platforms: []Platform{
			{Name: "linux/amd64", Binary: self, Packages: pkgs},
			{Name: "linux/arm64", Binary: self, Packages: arm},
		},
	}
}

// The bill lists the image, the binary's Go modules once each (on both
// platforms), the standard library, and each Debian package per
// architecture, with the image depending on the binary and the packages
// and the binary on its modules; it decodes back as CycloneDX.
func TestBillListsModulesAndPackages(t *testing.T) {
	in := testInput(t)
	bom, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Encode(&buf, bom); err != nil {
		t.Fatal(err)
	}
	var back cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(buf.Bytes()), cdx.BOMFileFormatJSON).Decode(&back); err != nil {
		t.Fatalf("decode: %v\n%s", err, buf.String())
	}
	if back.SpecVersion != cdx.SpecVersion1_6 || back.Metadata.Component.Type != cdx.ComponentTypeContainer ||
		back.Metadata.Component.Version != "0.1.0" || back.Metadata.Timestamp != "2026-12-06T06:34:51Z" {
		t.Errorf("metadata %+v, spec %s", back.Metadata.Component, back.SpecVersion)
	}
	byPURL := map[string]cdx.Component{}
	for _, c := range *back.Components {
		if _, dup := byPURL[c.PackageURL]; dup {
			t.Errorf("%s listed twice", c.PackageURL)
		}
		byPURL[c.PackageURL] = c
	}
	platforms := func(c cdx.Component) []string {
		var p []string
		for _, prop := range *c.Properties {
			if prop.Name == "ipvsproxy:platform" {
				p = append(p, prop.Value)
			}
		}
		return p
	}
	cdxModule := "pkg:golang/github.com/CycloneDX/cyclonedx-go@v0.9.3"
	for purl, want := range map[string][]string{
		cdxModule: {"linux/amd64", "linux/arm64"},
		"pkg:deb/debian/iptables@1.8.9-2?arch=amd64&distro=debian-12":        {"linux/amd64"},
		"pkg:deb/debian/iptables@1.8.9-2?arch=arm64&distro=debian-12":        {"linux/arm64"},
		"pkg:deb/debian/libc6@2.36-9%2Bdeb12u10?arch=amd64&distro=debian-12": {"linux/amd64"},
		"pkg:deb/debian/tzdata@2025b-0%2Bdeb12u1?arch=all&distro=debian-12":  {"linux/arm64"},
		"pkg:golang/stdlib@1.26.8":                                           {"linux/amd64", "linux/arm64"},
		"pkg:golang/k8s.io/client-go@v0.36.4":                                {"linux/amd64", "linux/arm64"},
	} {
		c, ok := byPURL[purl]
		if !ok {
			t.Errorf("no component %s", purl)
			continue
		}
		if got := platforms(c); !slices.Equal(got, want) {
			t.Errorf("%s on %v, want %v", purl, got, want)
		}
	}
	deps := map[string][]string{}
	for _, d := range *back.Dependencies {
		deps[d.Ref] = *d.Dependencies
	}
	main := "pkg:golang/" + in.Platforms[0].Binary.Main.Path + "@0.1.0"
	if !slices.Contains(deps["image"], main) || !slices.Contains(deps["image"], "pkg:deb/debian/iptables@1.8.9-2?arch=arm64&distro=debian-12") {
		t.Errorf("the image depends on %v", deps["image"])
	}
	if _, ok := byPURL["pkg:golang/k8s.io/client-go@v0.36.3"]; ok {
		t.Errorf("the replaced client-go is listed, not only its replacement")
	}
	if !slices.Contains(deps[main], cdxModule) {
		t.Errorf("the binary depends on %v, want %s among them", deps[main], cdxModule)
	}
}

// The same input gives the same document, serial number included; another
// image digest another serial number.
func TestBillIsReproducible(t *testing.T) {
	in := testInput(t)
	var out [2]bytes.Buffer
	for i := range out {
		bom, err := Build(in)
		if err != nil {
			t.Fatal(err)
		}
		if err := Encode(&out[i], bom); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(out[0].Bytes(), out[1].Bytes()) {
		t.Errorf("two bills of one input differ")
	}
	other := in
	other.Digest = "sha256:" + strings.Repeat("cd", 32)
	a, _ := Build(in)
	b, _ := Build(other)
	if a.SerialNumber == b.SerialNumber || !strings.HasPrefix(a.SerialNumber, "urn:uuid:") {
		t.Errorf("serial numbers %s and %s", a.SerialNumber, b.SerialNumber)
	}
}

func TestReadPackagesRefusesOtherLines(t *testing.T) {
	if _, err := ReadPackages(strings.NewReader("iptables 1.8.9-2\n")); err == nil {
		t.Error("a line without the architecture was read")
	}
}
