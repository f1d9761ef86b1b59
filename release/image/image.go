// Package image builds ipvsproxy's container image without a container
// engine: one layer per platform, deploy/rootfs/build-rootfs.sh's tarball
// as it is, under an OCI config that runs the daemon, gathered in an OCI
// image index of every platform. The same inputs give the same digests:
// every time in it is the commit's, and the layers are compressed by the
// Go standard library's gzip, which writes no time or name.
package image

import (
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Binary is where the daemon lives in the image (deploy/rootfs/build-rootfs.sh).
const Binary = "/usr/local/bin/ipvsproxy"

// The OCI annotation keys (image-spec annotations.md) the config carries as
// labels.
const (
	LabelTitle       = "org.opencontainers.image.title"
	LabelDescription = "org.opencontainers.image.description"
	LabelLicenses    = "org.opencontainers.image.licenses"
	LabelVersion     = "org.opencontainers.image.version"
	LabelRevision    = "org.opencontainers.image.revision"
	LabelSource      = "org.opencontainers.image.source"
	LabelCreated     = "org.opencontainers.image.created"
)

// Spec is what an image is built from.
type Spec struct {
	// Version is the release (the VERSION file's, or make's VERSION=).
	Version string
	// Revision is the git commit, with "-dirty" when the tree differed.
	Revision string
	// Source is the repository's address.
	Source string
	// Created is the commit's time: the config's and the labels' time.
	Created time.Time
	// Platforms are the images of the index, in this order.
	Platforms []PlatformRootfs
}

// PlatformRootfs is one platform's root file system: build-rootfs.sh's tarball.
type PlatformRootfs struct {
	Platform v1.Platform
	Rootfs   string
}

// Labels are the OCI labels of every image of spec.
func (s Spec) Labels() map[string]string {
	return map[string]string{
		LabelTitle:       "ipvsproxy",
		LabelDescription: "Kubernetes service proxy on IPVS, replacing kube-proxy",
		LabelLicenses:    "Apache-2.0",
		LabelVersion:     s.Version,
		LabelRevision:    s.Revision,
		LabelSource:      s.Source,
		LabelCreated:     s.Created.UTC().Format(time.RFC3339),
	}
}

// Build makes the index of spec's platforms, each one image of one layer.
func Build(spec Spec) (v1.ImageIndex, error) {
	if spec.Version == "" || spec.Revision == "" || spec.Created.IsZero() {
		return nil, fmt.Errorf("image spec without version, revision or creation time: %+v", spec)
	}
	if len(spec.Platforms) == 0 {
		return nil, fmt.Errorf("image spec without platforms")
	}
	var adds []mutate.IndexAddendum
	seen := map[string]bool{}
	for _, p := range spec.Platforms {
		if seen[p.Platform.String()] {
			return nil, fmt.Errorf("platform %s given twice", p.Platform)
		}
		seen[p.Platform.String()] = true
		img, err := platformImage(spec, p)
		if err != nil {
			return nil, err
		}
		platform := p.Platform
		adds = append(adds, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &platform},
		})
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	return mutate.AppendManifests(idx, adds...), nil
}

func platformImage(spec Spec, p PlatformRootfs) (v1.Image, error) {
	layer, err := tarball.LayerFromFile(p.Rootfs, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("read the %s root file system %s: %w", p.Platform, p.Rootfs, err)
	}
	created := v1.Time{Time: spec.Created.UTC()}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return nil, fmt.Errorf("add the %s layer: %w", p.Platform, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.History = []v1.History{{
		Created:   created,
		CreatedBy: "deploy/rootfs/build-rootfs.sh",
		Comment:   "Debian packages and the ipvsproxy binary",
	}}
	cf.OS, cf.Architecture, cf.Variant, cf.OSVersion = p.Platform.OS, p.Platform.Architecture, p.Platform.Variant, p.Platform.OSVersion
	cf.Config.Entrypoint = []string{Binary}
	cf.Config.Cmd = []string{"run"}
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cf.Config.Labels = spec.Labels()
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set the %s config: %w", p.Platform, err)
	}
	return img, nil
}

// ParsePlatform reads "linux/arm64" or "linux/arm64/v8".
func ParsePlatform(s string) (v1.Platform, error) {
	p, err := v1.ParsePlatform(s)
	if err != nil {
		return v1.Platform{}, err
	}
	if p.OS == "" || p.Architecture == "" {
		return v1.Platform{}, fmt.Errorf("platform %q: want OS/ARCH", s)
	}
	return *p, nil
}
