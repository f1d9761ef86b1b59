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
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// kustomization is the subset of kustomize.config.k8s.io/v1beta1 that the
// manifests use. It is decoded strictly: a kustomization using any other
// feature fails to render here instead of rendering differently from
// kustomize.
type kustomization struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Resources  []string        `json:"resources,omitempty"`
	Patches    []patchFile     `json:"patches,omitempty"`
	Images     []imageOverride `json:"images,omitempty"`
}

// patchFile is a strategic merge patch; its target is the object with the
// same apiVersion, kind, namespace and name, as kustomize infers it.
type patchFile struct {
	Path string `json:"path"`
}

// imageOverride replaces the repository and/or tag of every container image
// whose repository is Name.
type imageOverride struct {
	Name    string `json:"name"`
	NewName string `json:"newName,omitempty"`
	NewTag  string `json:"newTag,omitempty"`
}

// Render resolves the kustomization in dir (resources, then patches, then
// images) and returns its objects in the order the resources list them.
func Render(dir string) ([]*unstructured.Unstructured, error) {
	k, err := readKustomization(dir)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, res := range k.Resources {
		path := filepath.Join(dir, res)
		st, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("render %s: resource %s: %w", dir, res, err)
		}
		var more []*unstructured.Unstructured
		if st.IsDir() {
			more, err = Render(path)
		} else {
			more, err = ReadObjects(path)
		}
		if err != nil {
			return nil, fmt.Errorf("render %s: %w", dir, err)
		}
		objs = append(objs, more...)
	}
	for _, p := range k.Patches {
		if err := applyPatchFile(objs, filepath.Join(dir, p.Path)); err != nil {
			return nil, fmt.Errorf("render %s: %w", dir, err)
		}
	}
	for _, img := range k.Images {
		if n := overrideImages(objs, img); n == 0 {
			// kustomize silently ignores an override that matches nothing;
			// here it is a mistake worth failing on (a renamed image).
			return nil, fmt.Errorf("render %s: image override %q matches no container", dir, img.Name)
		}
	}
	return objs, nil
}

func readKustomization(dir string) (*kustomization, error) {
	path := filepath.Join(dir, "kustomization.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read kustomization: %w", err)
	}
	var k kustomization
	if err := unmarshalStrict(data, &k); err != nil {
		return nil, fmt.Errorf("decode %s (only resources, patches with a path, and images are supported): %w", path, err)
	}
	if k.Kind != "Kustomization" {
		return nil, fmt.Errorf("decode %s: kind %q, want Kustomization", path, k.Kind)
	}
	return &k, nil
}

// ReadObjects decodes every YAML document in path. Duplicate keys fail, as
// they do in the API server's strict field validation.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	defer f.Close()
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read manifest %s: %w", path, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("decode manifest %s: %w", path, err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("decode manifest %s: %w", path, err)
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

// applyPatchFile merges each patch in path into the one object it names,
// using the typed struct's patch strategy (containers merge by name, and so
// on), which is what kustomize does for built-in kinds.
func applyPatchFile(objs []*unstructured.Unstructured, path string) error {
	patches, err := ReadObjects(path)
	if err != nil {
		return err
	}
	for _, p := range patches {
		// The patch itself must be a valid partial object of its kind.
		if _, err := Decode(p); err != nil {
			return fmt.Errorf("patch %s: %w", path, err)
		}
		target := findObject(objs, p)
		if target == nil {
			return fmt.Errorf("patch %s: no %s %s/%s to patch", path, p.GetKind(), p.GetNamespace(), p.GetName())
		}
		typed, err := scheme.Scheme.New(target.GroupVersionKind())
		if err != nil {
			return fmt.Errorf("patch %s: %w", path, err)
		}
		orig, err := target.MarshalJSON()
		if err != nil {
			return fmt.Errorf("patch %s: %w", path, err)
		}
		pj, err := p.MarshalJSON()
		if err != nil {
			return fmt.Errorf("patch %s: %w", path, err)
		}
		merged, err := strategicpatch.StrategicMergePatch(orig, pj, typed)
		if err != nil {
			return fmt.Errorf("patch %s %s/%s with %s: %w", target.GetKind(), target.GetNamespace(), target.GetName(), path, err)
		}
		if err := target.UnmarshalJSON(merged); err != nil {
			return fmt.Errorf("patch %s: %w", path, err)
		}
	}
	return nil
}

func findObject(objs []*unstructured.Unstructured, like *unstructured.Unstructured) *unstructured.Unstructured {
	var found *unstructured.Unstructured
	for _, o := range objs {
		if o.GroupVersionKind() == like.GroupVersionKind() && o.GetNamespace() == like.GetNamespace() && o.GetName() == like.GetName() {
			found = o
		}
	}
	return found
}

// overrideImages rewrites the image of every container and init container
// whose repository is img.Name, and returns how many it rewrote.
func overrideImages(objs []*unstructured.Unstructured, img imageOverride) int {
	n := 0
	for _, o := range objs {
		n += walkContainers(o.Object, func(c map[string]any) {
			image, _ := c["image"].(string)
			repo, tag, digest := splitImage(image)
			if repo != img.Name {
				return
			}
			if img.NewName != "" {
				repo = img.NewName
			}
			if img.NewTag != "" {
				tag, digest = img.NewTag, ""
			}
			switch {
			case digest != "":
				c["image"] = repo + "@" + digest
			case tag != "":
				c["image"] = repo + ":" + tag
			default:
				c["image"] = repo
			}
		}, img.Name)
	}
	return n
}

// walkContainers calls fn on every element of a "containers" or
// "initContainers" list anywhere under v whose image has the repository
// repo, and returns how many it found.
func walkContainers(v any, fn func(map[string]any), repo string) int {
	n := 0
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			if list, ok := child.([]any); ok && (k == "containers" || k == "initContainers") {
				for _, item := range list {
					c, ok := item.(map[string]any)
					if !ok {
						continue
					}
					image, _ := c["image"].(string)
					if r, _, _ := splitImage(image); r == repo {
						fn(c)
						n++
					}
				}
				continue
			}
			n += walkContainers(child, fn, repo)
		}
	case []any:
		for _, item := range t {
			n += walkContainers(item, fn, repo)
		}
	}
	return n
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
