package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// imageOverride is one entry of a kustomization's images: list.
type imageOverride struct {
	Name    string `json:"name"`
	NewName string `json:"newName,omitempty"`
	NewTag  string `json:"newTag,omitempty"`
	Digest  string `json:"digest,omitempty"`
}

// Render builds the kustomization in dir with kustomize itself
// (sigs.k8s.io/kustomize/api/krusty, what `kubectl kustomize` runs, in
// process: no kubectl needed) and decodes the objects, duplicate keys
// refused. One rule is added on top: an image override that matches no
// container is an error; kustomize ignores it silently, and here it means a
// renamed image that users would never get.
//
// A dir that is a Helm chart (IsChart) is rendered by RenderChart with its
// default values; "CHART=VALUES.yaml" renders it with that values file. A
// packaged chart (.tgz, what `make release` writes) is rendered the same
// way, and a .yaml file (a release's rendered manifests) is read as it is.
func Render(dir string) ([]*unstructured.Unstructured, error) {
	if chart, values, ok := strings.Cut(dir, "="); ok && (IsChart(chart) || strings.HasSuffix(chart, ".tgz")) {
		return RenderChart(chart, values)
	}
	if IsChart(dir) || strings.HasSuffix(dir, ".tgz") {
		return RenderChart(dir)
	}
	if strings.HasSuffix(dir, ".yaml") {
		return ReadObjects(dir)
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resources, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", dir, err)
	}
	out, err := resources.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", dir, err)
	}
	objs, err := readObjects(bytes.NewReader(out), dir)
	if err != nil {
		return nil, err
	}
	overrides, err := imageOverridesOf(dir)
	if err != nil {
		return nil, err
	}
	for _, img := range overrides {
		if !imageOverridden(objs, img) {
			return nil, fmt.Errorf("render %s: image override %q matches no container", dir, img.Name)
		}
	}
	return objs, nil
}

// imageOverridesOf reads the images: list of dir's own kustomization (kustomize
// has already checked the file; only that list is read here).
func imageOverridesOf(dir string) ([]imageOverride, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, fmt.Errorf("read kustomization: %w", err)
	}
	var k struct {
		Images []imageOverride `json:"images"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("read images of %s: %w", dir, err)
	}
	return k.Images, nil
}

// imageOverridden reports whether some container's image is what img
// makes of its Name.
func imageOverridden(objs []*unstructured.Unstructured, img imageOverride) bool {
	wantRepo := img.Name
	if img.NewName != "" {
		wantRepo = img.NewName
	}
	found := false
	for _, o := range objs {
		walkContainers(o.Object, func(image string) {
			repo, tag, digest := splitImage(image)
			found = found || repo == wantRepo && (img.NewTag == "" || tag == img.NewTag) && (img.Digest == "" || digest == img.Digest)
		})
	}
	return found
}

// walkContainers calls fn with the image of every element of a
// "containers" or "initContainers" list anywhere under v.
func walkContainers(v any, fn func(image string)) {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			if list, ok := child.([]any); ok && (k == "containers" || k == "initContainers") {
				for _, item := range list {
					if c, ok := item.(map[string]any); ok {
						image, _ := c["image"].(string)
						fn(image)
					}
				}
				continue
			}
			walkContainers(child, fn)
		}
	case []any:
		for _, item := range t {
			walkContainers(item, fn)
		}
	}
}

// ReadObjects decodes every YAML document in path. Duplicate keys fail, as
// they do in the API server's strict field validation.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	defer f.Close()
	return readObjects(f, path)
}

func readObjects(in io.Reader, name string) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(in))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read manifest %s: %w", name, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("decode manifest %s: %w", name, err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("decode manifest %s: %w", name, err)
		}
		objs = append(objs, u)
	}
}

func stripComments(doc []byte) []byte {
	var out bytes.Buffer
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out.Write(line)
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}

// splitImage splits "registry:5000/a/b:tag@sha256:..." into repository, tag
// and digest. A colon before the last slash is a registry port, not a tag.
func splitImage(image string) (repo, tag, digest string) {
	repo = image
	if i := strings.Index(repo, "@"); i >= 0 {
		repo, digest = repo[:i], repo[i+1:]
	}
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo, tag = repo[:i], repo[i+1:]
	}
	return repo, tag, digest
}

// Decode converts obj into its typed form from client-go's scheme, failing
// on any field the type does not have: a misspelt field would otherwise be
// dropped silently by a lenient client and never reach the cluster.
func Decode(obj *unstructured.Unstructured) (any, error) {
	gvk := obj.GroupVersionKind()
	typed, err := scheme.Scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("decode %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	js, err := obj.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("decode %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	if err := unmarshalStrict(js, typed); err != nil {
		return nil, fmt.Errorf("decode %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	return typed, nil
}

// unmarshalStrict decodes YAML or JSON the way the API server's strict field
// validation does: field names are case-sensitive (encoding/json alone would
// accept "hostnetwork"), and unknown or duplicate fields are errors.
func unmarshalStrict(data []byte, v any) error {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return err
	}
	strictErrs, err := sigsjson.UnmarshalStrict(js, v)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}
