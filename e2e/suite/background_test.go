//go:build e2e

package suite

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
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
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}
	once    sync.Once

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
	b := &background{cmd: c, started: time.Now(), done: make(chan struct{})}
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

// streamLineGapMax bounds the longest silence of a stream nothing cut, in
// its observation window (Gap): under emulation on a loaded host an
// untouched stream showed gaps of up to 2.4 s (CPU starvation, at no
// particular step); a cut connection stops for good, which is a silence up
// to the window's end, and 5 s or more would be a stall worth failing.
const streamLineGapMax = 5 * time.Second

// stream is a GET /stream over HTTP/1.0 (the echo server writes a line every
// 100 ms) from a namespace through ADDR:PORT, each line stamped on arrival.
type stream struct {
	*background
	where, target string
}

// streamLine is one line of a stream: when it came, and from which pod.
type streamLine struct {
	at   time.Time
	host string
}

// Stream starts one; the scenario closes it at its end if the step did not.
func (v *V) Stream(where, ip string, port int) *stream {
	target := hostPort(ip, port)
	b := v.Background(where, fmt.Sprintf(`(printf 'GET /stream HTTP/1.0\r\n\r\n'; sleep 1800) | socat - TCP:%s,linger=0 2>/dev/null`, target))
	s := &stream{background: b, where: where, target: target}
	// Before Background's own clean-up (cleanups run last first).
	v.s.t.Cleanup(s.Close)
	return s
}

// Close ends the connection with an RST, so IPVS holds the closed
// connection 10 s (CLOSE), not 2 min (TIME_WAIT): socat is killed first and
// the kernel resets its socket (linger=0); were its input closed first it
// would send a FIN. Then the rest of the pipeline.
func (s *stream) Close() {
	for _, pid := range groupMembers(s.cmd.Process.Pid, "socat") {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	s.Stop()
}

// groupMembers are the processes of process group pgid named comm.
func groupMembers(pgid int, comm string) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var pids []int
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		// After the command: state, ppid, pgrp.
		f := strings.Fields(s[end+1:])
		if len(f) < 3 || s[open+1:end] != comm || f[2] != strconv.Itoa(pgid) {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(s[:open])); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Received are the stream's "hostname=NAME seq=N" lines so far (not the
// HTTP header).
func (s *stream) Received() []streamLine {
	var out []streamLine
	for _, l := range s.Lines() {
		if rest, ok := strings.CutPrefix(l.text, "hostname="); ok {
			host, _, _ := strings.Cut(rest, " ")
			out = append(out, streamLine{l.at, host})
		}
	}
	return out
}

// WaitFlowing waits up to limit for the stream's first line.
func (s *stream) WaitFlowing(limit time.Duration) bool {
	ok, _ := waitUntil(limit, func() (bool, string) { return len(s.Received()) > 0, "" })
	return ok
}

// Gap is the longest silence of the stream in the observation window from
// to to, counted to the window's ends (largestSilence): a zero from is the
// stream's start, a zero to is now. A stream that stopped early is silent
// up to to, so a caller that passes the end of its observation demands
// lines until then. It returns how many lines arrived in the window too.
func (s *stream) Gap(from, to time.Time) (time.Duration, int) {
	if from.IsZero() {
		from = s.started
	}
	if to.IsZero() {
		to = time.Now()
	}
	var arrivals []time.Time
	for _, l := range s.Received() {
		arrivals = append(arrivals, l.at)
	}
	return largestSilence(arrivals, from, to)
}

// GapText is Gap as the transcript shows it: "0.13 (57 lines)".
func (s *stream) GapText(from, to time.Time) string {
	gap, n := s.Gap(from, to)
	return fmt.Sprintf("%.2f (%d lines)", gap.Seconds(), n)
}

// From counts the lines after t by the pod that wrote them (shown with
// reachedText).
func (s *stream) From(t time.Time) map[string]int {
	counts := map[string]int{}
	for _, l := range s.Received() {
		if l.at.After(t) {
			counts[l.host]++
		}
	}
	return counts
}
