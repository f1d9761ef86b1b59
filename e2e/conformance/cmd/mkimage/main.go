// Command mkimage writes a container image as an image archive (docker save's format, which
// `ctr images import` reads) from files of this machine and tarballs, without a container
// engine or a registry: the conformance cluster cannot pull, so every image it runs is made here.
//
//	mkimage -o agnhost.tar -tag registry.k8s.io/e2e-test-images/agnhost:2.63.0 \
//	    -entrypoint /agnhost -cmd pause -add /cache/agnhost=/agnhost -symlink /agnhost-2=agnhost
//
// -add copies a file's content (a symlink on this machine is followed), -symlink makes a link
// in the image, -dir an empty directory (-dir /tmp=1777), -layer adds an existing tarball as one layer.
package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	log.SetFlags(0)
	log.SetPrefix("mkimage: ")
	var (
		out, tag, entrypoint, cmd, workdir, user string
		adds, links, dirs, layers, envs          list
	)
	flag.StringVar(&out, "o", "", "output archive")
	flag.StringVar(&tag, "tag", "", "image name the archive carries (as the pod spec names it)")
	flag.StringVar(&entrypoint, "entrypoint", "", "entrypoint, a JSON array or one path")
	flag.StringVar(&cmd, "cmd", "", "command, a JSON array or one word")
	flag.StringVar(&workdir, "workdir", "", "working directory")
	flag.StringVar(&user, "user", "", "user")
	flag.Var(&adds, "add", "HOST_PATH=IMAGE_PATH, repeatable")
	flag.Var(&links, "symlink", "IMAGE_PATH=TARGET, repeatable")
	flag.Var(&dirs, "dir", "IMAGE_PATH[=OCTAL_MODE] of an empty directory, repeatable")
	flag.Var(&layers, "layer", "tarball added as a layer, repeatable")
	flag.Var(&envs, "env", "NAME=VALUE, repeatable")
	flag.Parse()
	if out == "" || tag == "" {
		log.Fatal("-o and -tag are required")
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		log.Fatalf("parse tag %q: %v", tag, err)
	}

	var imageLayers []v1.Layer
	for _, path := range layers {
		layer, err := tarball.LayerFromFile(path)
		if err != nil {
			log.Fatalf("read layer %s: %v", path, err)
		}
		imageLayers = append(imageLayers, layer)
	}
	if len(adds)+len(links)+len(dirs) > 0 {
		content, err := filesLayer(adds, links, dirs)
		if err != nil {
			log.Fatal(err)
		}
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(content)), nil
		})
		if err != nil {
			log.Fatalf("make layer: %v", err)
		}
		imageLayers = append(imageLayers, layer)
	}

	img, err := mutate.AppendLayers(empty.Image, imageLayers...)
	if err != nil {
		log.Fatalf("append layers: %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		log.Fatalf("read config: %v", err)
	}
	cf = cf.DeepCopy()
	// containerd matches an imported image to the node's platform by these two fields.
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Entrypoint = words(entrypoint)
	cf.Config.Cmd = words(cmd)
	cf.Config.WorkingDir = workdir
	cf.Config.User = user
	cf.Config.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, envs...)
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		log.Fatalf("set config: %v", err)
	}
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		log.Fatalf("write %s: %v", out, err)
	}
}

// words reads a JSON array, or a single word.
func words(s string) []string {
	if s == "" {
		return nil
	}
	var w []string
	if strings.HasPrefix(s, "[") {
		if err := json.Unmarshal([]byte(s), &w); err != nil {
			log.Fatalf("parse %q as a JSON array: %v", s, err)
		}
		return w
	}
	return []string{s}
}

// filesLayer is one tar layer holding the -add files, -symlink links and -dir directories,
// with every parent directory, sorted so that the same inputs make the same digest.
func filesLayer(adds, links, dirs []string) ([]byte, error) {
	type entry struct {
		hdr  tar.Header
		from string
	}
	entries := map[string]entry{}
	parents := func(p string) {
		for d := p; ; {
			i := strings.LastIndex(d, "/")
			if i <= 0 {
				return
			}
			d = d[:i]
			entries[d] = entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: d[1:] + "/", Mode: 0o755}}
		}
	}
	split := func(kv, flagName string) (string, string, error) {
		a, b, ok := strings.Cut(kv, "=")
		if !ok || a == "" || b == "" {
			return "", "", fmt.Errorf("-%s wants A=B, got %q", flagName, kv)
		}
		return a, b, nil
	}
	for _, kv := range adds {
		from, to, err := split(kv, "add")
		if err != nil {
			return nil, err
		}
		fi, err := os.Stat(from)
		if err != nil {
			return nil, fmt.Errorf("add %s: %w", from, err)
		}
		parents(to)
		entries[to] = entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: to[1:], Mode: int64(fi.Mode().Perm()), Size: fi.Size()}, from: from}
	}
	for _, kv := range links {
		path, target, err := split(kv, "symlink")
		if err != nil {
			return nil, err
		}
		parents(path)
		entries[path] = entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: path[1:], Linkname: target, Mode: 0o777}}
	}
	for _, d := range dirs {
		path, modeText, _ := strings.Cut(d, "=")
		mode := int64(0o755)
		if modeText != "" {
			m, err := strconv.ParseInt(modeText, 8, 32)
			if err != nil {
				return nil, fmt.Errorf("-dir %s: mode %q: %w", path, modeText, err)
			}
			mode = m
		}
		parents(path)
		// The sticky bit travels in the tar header as c_ISVTX.
		entries[path] = entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: path[1:] + "/", Mode: mode}}
	}
	paths := make([]string, 0, len(entries))
	for p := range entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := entries[p]
		if err := tw.WriteHeader(&e.hdr); err != nil {
			return nil, fmt.Errorf("write header of %s: %w", p, err)
		}
		if e.from == "" {
			continue
		}
		f, err := os.Open(e.from)
		if err != nil {
			return nil, fmt.Errorf("add %s: %w", e.from, err)
		}
		_, err = io.Copy(tw, f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("copy %s into the layer: %w", e.from, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close layer: %w", err)
	}
	return buf.Bytes(), nil
}
