//go:build e2e

package suite

import (
	"bufio"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ipvsproxy/ipvsproxy/netif"
	"github.com/vishvananda/netns"
)

// Helpers of the scenarios in protocols_test.go and kernel_test.go:
// programs left running while a step measures (senders, listeners, stand-in
// daemons) and the kube-ipvs0 readers.

// timedLine is one line a background program printed, stamped on arrival.
type timedLine struct {
	at   time.Time
	text string
}

// background is a shell command left running in a network namespace: its
// output lines are kept with their arrival times, and Stop ends its whole
// process group (a pipeline's every member).
type background struct {
	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once

	mu    sync.Mutex
	lines []timedLine
}

// Background starts cmd under bash in namespace where ("-": the VM's root
// namespace) and stops it when the scenario ends, if the step has not.
func (v *V) Background(where, cmd string) *background {
	c := shell(where, cmd)
	// A group of its own, so that Stop reaches the pipeline's members too.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := c.StdoutPipe()
	v.Must(err)
	c.Stderr = c.Stdout
	if err := c.Start(); err != nil {
		v.Fatalf("start %q in %s: %v", cmd, where, err)
	}
	b := &background{cmd: c, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			b.mu.Lock()
			b.lines = append(b.lines, timedLine{time.Now(), sc.Text()})
			b.mu.Unlock()
		}
		c.Wait()
		close(b.done)
	}()
	v.s.t.Cleanup(b.Stop)
	return b
}

// Stop kills the process group and waits (10 s at most) for its output to end.
func (b *background) Stop() {
	b.once.Do(func() {
		syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-b.done:
		case <-time.After(10 * time.Second):
		}
	})
}

// Lines is what it printed so far.
func (b *background) Lines() []timedLine {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.lines)
}

// seconds is d as the bash scenarios printed it ("1.3").
func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) }

// withDummy runs fn on the node's kube-ipvs0, opened with the project's
// netif package.
func withDummy(node string, fn func(netif.Interface) error) error {
	return inNamespace(node, func(h netns.NsHandle) error {
		k, err := netif.NewInNamespace("kube-ipvs0", h)
		if err != nil {
			return err
		}
		// Close is not part of Interface (the proxier keeps its handle for life).
		if c, ok := k.(interface{ Close() error }); ok {
			defer c.Close()
		}
		return fn(k)
	})
}

// serviceRoutes are the node's Service-range routes: `local` routes on
// kube-ipvs0 in table local with the proxier's protocol (233).
func serviceRoutes(node string) ([]netip.Prefix, error) {
	var routes []netip.Prefix
	err := withDummy(node, func(k netif.Interface) error {
		var err error
		routes, err = k.ServiceRoutes()
		return err
	})
	return routes, err
}

// boundIn are the addresses bound on the node's kube-ipvs0 that lie in one
// of the prefixes, sorted.
func boundIn(node string, prefixes ...netip.Prefix) ([]netip.Addr, error) {
	var in []netip.Addr
	err := withDummy(node, func(k netif.Interface) error {
		addrs, err := k.DummyAddresses()
		for _, a := range addrs {
			if slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(a) }) {
				in = append(in, a)
			}
		}
		return err
	})
	slices.SortFunc(in, netip.Addr.Compare)
	return in, err
}

// joined is a list as the transcript shows it, one space between.
func joined[T fmt.Stringer](xs []T) string {
	var s []string
	for _, x := range xs {
		s = append(s, x.String())
	}
	return strings.Join(s, " ")
}

// WaitListening waits until something listens on the TCP port in the namespace.
func (v *V) WaitListening(where string, port int) {
	v.WaitUntil(20*time.Second, fmt.Sprintf("nothing listens on %s's TCP port %d", where, port), func() (bool, string) {
		a := run(where, fmt.Sprintf("ss -Hltn 'sport = :%d'", port))
		return a.Status == 0 && a.Out != "", a.Out
	})
}
