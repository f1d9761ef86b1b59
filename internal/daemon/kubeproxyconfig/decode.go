package kubeproxyconfig

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	kubeproxy "k8s.io/kube-proxy/config/v1alpha1"
)

// File is a decoded KubeProxyConfiguration and what decoding it found.
type File struct {
	Config *kubeproxy.KubeProxyConfiguration
	// Unknown are the fields of the file that this build's
	// KubeProxyConfiguration does not have, sorted by path: ignored, and
	// named in one warning at start-up.
	Unknown []UnknownField
	// Sum is the digest of the bytes decoded, so a watcher can tell a real
	// change.
	Sum [sha256.Size]byte
}

// UnknownField is a field this build does not know: one a newer kube-proxy
// or kubeadm writes, or a misspelling that is more than a change of case.
type UnknownField struct {
	// Path is the field's YAML path, e.g. "ipvs.newTimeout".
	Path string
	// Near is the known field of the same object whose name is at most two
	// edits away, e.g. "ipvs.tcpTimeout" for "ipvs.tcpTimout": the
	// misspelling it may be. "" when no known field is that close.
	Near string
}

func (u UnknownField) String() string {
	if u.Near == "" {
		return u.Path
	}
	return fmt.Sprintf("%s (did you mean %s?)", u.Path, u.Near)
}

// The file is decoded as kube-proxy decodes it: strictly first, by a
// scheme that knows KubeProxyConfiguration v1alpha1 only; when that fails
// for fields it does not know, leniently, and the file is used with those
// fields ignored. kube-proxy logs one line then; here every unknown field
// is named, with the known field it is closest to. What a newer release
// adds never stops a restarted pod, while a typo is still reported:
//   - A field that differs from a known one only in case or in '-' and
//     '_' (strictArp, strict_arp for strictARP) is an error naming the
//     known field. Kubernetes' JSON decoding is case-sensitive, so such a
//     field would be silently lost, and API conventions never add a field
//     that differs from another only in case.
//   - Any other unknown field is a warning, naming the known field within
//     two edits when there is one (tcpTimout: tcpTimeout). Not an error:
//     upstream's own fields are that close to each other (tcpTimeout,
//     udpTimeout), so a new one could be too.
//   - A duplicate field stays an error: no release writes one, and which
//     of the two values was meant is a guess.
var (
	strictCodecs  = newCodecs(serializer.EnableStrict)
	lenientCodecs = newCodecs(serializer.DisableStrict)
)

func newCodecs(mutator serializer.CodecFactoryOptionsMutator) serializer.CodecFactory {
	s := runtime.NewScheme()
	if err := kubeproxy.AddToScheme(s); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(s, mutator)
}

// Read reads and decodes a KubeProxyConfiguration (see Decode).
func Read(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read --config: %w", err)
	}
	f, err := Decode(data)
	if err != nil {
		return &File{Sum: sha256.Sum256(data)}, fmt.Errorf("--config %s: %w", path, err)
	}
	return f, nil
}

// Decode decodes a KubeProxyConfiguration v1alpha1: fields this build does
// not know are returned in File.Unknown, unless one is a known field
// spelled in another case, or a field is given twice (errors). The mode is
// not checked here: an explicit --proxy-mode overrides it (CheckMode).
func Decode(data []byte) (*File, error) {
	want := kubeproxy.SchemeGroupVersion.WithKind("KubeProxyConfiguration")
	f := &File{Sum: sha256.Sum256(data)}
	obj, gvk, err := strictCodecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		strict, ok := runtime.AsStrictDecodingError(err)
		if !ok {
			return nil, fmt.Errorf("decode KubeProxyConfiguration %s: %w", want.GroupVersion(), err)
		}
		if f.Unknown, err = unknownFields(strict.Errors()); err != nil {
			return nil, fmt.Errorf("decode KubeProxyConfiguration %s: %w", want.GroupVersion(), err)
		}
		if obj, gvk, err = lenientCodecs.UniversalDeserializer().Decode(data, nil, nil); err != nil {
			return nil, fmt.Errorf("decode KubeProxyConfiguration %s: %w", want.GroupVersion(), err)
		}
	}
	cfg, ok := obj.(*kubeproxy.KubeProxyConfiguration)
	if !ok || *gvk != want {
		return nil, fmt.Errorf("want kind %s of %s, got %s", want.Kind, want.GroupVersion(), gvk)
	}
	f.Config = cfg
	return f, nil
}

// unknownFields sorts the strict decoder's complaints: unknown fields are
// returned, everything else (a duplicate, a field in another case) is an
// error naming each one.
func unknownFields(errs []error) ([]UnknownField, error) {
	var unknown []UnknownField
	var refused []error
	for _, e := range errs {
		path, ok := unknownFieldPath(e)
		if !ok {
			refused = append(refused, e)
			continue
		}
		parent, name := splitPath(path)
		siblings := knownFields[parent]
		if same := sameBarCase(name, siblings); same != "" {
			refused = append(refused, fmt.Errorf("%w: field names are case-sensitive; did you mean %q?", e, joinPath(parent, same)))
			continue
		}
		u := UnknownField{Path: path}
		if near := nearest(name, siblings); near != "" {
			u.Near = joinPath(parent, near)
		}
		unknown = append(unknown, u)
	}
	sort.Slice(unknown, func(i, j int) bool { return unknown[i].Path < unknown[j].Path })
	return unknown, errors.Join(refused...)
}

// unknownFieldPath is the path of sigs.k8s.io/json's `unknown field "P"`
// error, which also has a FieldPath method.
func unknownFieldPath(e error) (string, bool) {
	p, ok := e.(interface{ FieldPath() string })
	if !ok || !strings.HasPrefix(e.Error(), "unknown field ") {
		return "", false
	}
	return p.FieldPath(), true
}

// indexes are the [N] of a path through a list (logging.vmodule[0].x).
var indexes = regexp.MustCompile(`\[[0-9]+\]`)

// splitPath returns the object a field is in (without list indexes) and
// its name.
func splitPath(path string) (parent, name string) {
	path = indexes.ReplaceAllString(path, "")
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i], path[i+1:]
	}
	return "", path
}

func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

var jsonUnmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()

// knownFields maps each object of KubeProxyConfiguration ("" the top,
// "ipvs", "logging.options.json", "logging.vmodule", ...) to the names of
// its fields, from the Go type this build decodes into.
var knownFields = func() map[string][]string {
	out := map[string][]string{}
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			ft := f.Type
			if f.Anonymous && name == "" {
				if ft == reflect.TypeOf(metav1.TypeMeta{}) {
					out[path] = append(out[path], "apiVersion", "kind")
				} else {
					walk(ft, path) // inline
				}
				continue
			}
			out[path] = append(out[path], name)
			for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
				ft = ft.Elem()
			}
			// A type that decodes itself (metav1.Duration, a quantity) is a value, not an object.
			if ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(jsonUnmarshaler) {
				walk(ft, joinPath(path, name))
			}
		}
	}
	walk(reflect.TypeOf(kubeproxy.KubeProxyConfiguration{}), "")
	for _, names := range out {
		sort.Strings(names)
	}
	return out
}()

// sameBarCase returns the known name that name equals but for case and
// '-' or '_', or "".
func sameBarCase(name string, known []string) string {
	fold := func(s string) string {
		return strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(s))
	}
	for _, k := range known {
		if fold(k) == fold(name) {
			return k
		}
	}
	return ""
}

// nearest returns the known name at most two edits from name (case
// ignored), the closest first, or "".
func nearest(name string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if d := editDistance(strings.ToLower(name), strings.ToLower(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b in bytes (field
// names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// CheckMode accepts the only mode ipvsproxy implements; "" is kube-proxy's
// default. --proxy-mode is checked by it, and so is the file's mode when
// --proxy-mode is not given: kubeadm v1.37 writes `mode: iptables` where
// the mode was left empty, and the same ConfigMap serves kube-proxy on the
// nodes not yet migrated, so the kubeadm overlay runs with
// --proxy-mode=ipvs, which wins over the file's mode.
func CheckMode(mode string) error {
	switch strings.ToLower(mode) {
	case "", "ipvs":
		return nil
	default:
		return fmt.Errorf("%q: ipvsproxy implements only the ipvs mode", mode)
	}
}
