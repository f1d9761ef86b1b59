package sysctl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// ErrNotFound: the kernel has no such parameter (module not loaded).
var ErrNotFound = errors.New("not found")

// Interface reads and writes sysctls by dotted name ("net.ipv4.ip_forward").
type Interface interface {
	Get(name string) (string, error)
	Set(name, value string) error
}

// New returns the real /proc/sys implementation.
func New() Interface { return NewAt("/proc/sys") }

// NewAt reads and writes under root instead of /proc/sys: in a container
// whose /proc/sys the runtime mounts read-only, the host's /proc/sys/net can
// be mounted elsewhere (e.g. /host/proc/sys/net) and written there. The
// files show the network namespace of the process that opens them.
func NewAt(root string) Interface { return procSys{root: root} }

type procSys struct{ root string }

func (p procSys) path(name string) string {
	return filepath.Join(p.root, strings.ReplaceAll(name, ".", "/"))
}

func (p procSys) Get(name string) (string, error) {
	b, err := os.ReadFile(p.path(name))
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read sysctl %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("read sysctl %s: %w", name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (p procSys) Set(name, value string) error {
	// No O_CREATE: a parameter that does not exist must fail, as in /proc.
	f, err := os.OpenFile(p.path(name), os.O_WRONLY|os.O_TRUNC, 0)
	if err == nil {
		_, err = f.WriteString(value + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("write sysctl %s=%s: %w", name, value, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("write sysctl %s=%s: %w", name, value, err)
	}
	return nil
}

// Fake is an in-memory Interface. Only names present in Values exist, as in
// the kernel, where a parameter appears only once its module is loaded.
type Fake struct {
	mu     sync.Mutex
	Values map[string]string
}

// NewFake returns a Fake that knows the given parameters.
func NewFake(values map[string]string) *Fake {
	f := &Fake{Values: map[string]string{}}
	for k, v := range values {
		f.Values[k] = v
	}
	return f
}

func (f *Fake) Get(name string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.Values[name]
	if !ok {
		return "", fmt.Errorf("read sysctl %s: %w", name, ErrNotFound)
	}
	return v, nil
}

func (f *Fake) Set(name, value string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.Values[name]; !ok {
		return fmt.Errorf("write sysctl %s=%s: %w", name, value, ErrNotFound)
	}
	f.Values[name] = value
	return nil
}
