package hostsetup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
)

// SchedulerSources are where the kernel's IPVS schedulers are read without
// loading any: asking IPVS itself (probeScheduler) makes the kernel load
// ip_vs_<name> for the question.
type SchedulerSources struct {
	// ProcModules lists the loaded modules (/proc/modules, the host's in a
	// container too: modules are not namespaced).
	ProcModules string
	// SysModule has a directory per loaded module and per built-in one
	// with parameters (/sys/module).
	SysModule string
	// ModulesBuiltin lists every built-in module
	// (/lib/modules/RELEASE/modules.builtin); the base DaemonSet does not
	// mount /lib/modules, and then a built-in scheduler without parameters
	// is not seen: name it in --ipvs-allowed-schedulers.
	ModulesBuiltin string
}

// KernelSchedulerSources are the host's, for the running kernel release.
func KernelSchedulerSources(release string) SchedulerSources {
	return SchedulerSources{
		ProcModules:    "/proc/modules",
		SysModule:      "/sys/module",
		ModulesBuiltin: filepath.Join("/lib/modules", release, "modules.builtin"),
	}
}

// AvailableSchedulers are the stock IPVS schedulers the kernel has now,
// loaded or built in, sorted: the schedulers a Service may choose unless
// the operator lists them (--ipvs-allowed-schedulers). It loads nothing. A
// source that cannot be read is left out and named in the error; what the
// others gave is still returned (a missing modules.builtin is no error).
func AvailableSchedulers(src SchedulerSources) ([]string, error) {
	found := map[string]bool{}
	var errs []error
	if err := eachLine(src.ProcModules, func(line string) {
		name, _, _ := strings.Cut(line, " ")
		found[name] = true
	}); err != nil {
		errs = append(errs, err)
	}
	for _, s := range ipvs.StockSchedulers {
		if _, err := os.Stat(filepath.Join(src.SysModule, "ip_vs_"+s)); err == nil {
			found["ip_vs_"+s] = true
		}
	}
	if err := eachLine(src.ModulesBuiltin, func(line string) {
		found[strings.TrimSuffix(filepath.Base(line), ".ko")] = true
	}); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	var out []string
	for _, s := range ipvs.StockSchedulers {
		if found["ip_vs_"+s] {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out, errors.Join(errs...)
}

// eachLine calls fn with each line of the file at path.
func eachLine(path string, fn func(string)) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read the kernel's modules: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fn(s.Text())
	}
	if err := s.Err(); err != nil {
		return fmt.Errorf("read the kernel's modules from %s: %w", path, err)
	}
	return nil
}
