//go:build e2e

package suite

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The nodes' daemons, stopped and started as e2e/scenarios/setup.sh's
// start_proxier and stop_proxier do: the same flags, the same log and pid
// files in E2E_LOGS, so that guest.sh's later bash scenarios and its final
// clean-up find the daemon a Go scenario started. Each binary run of the
// suite ends after its scenario, so a daemon started here outlives the
// process that started it, as setup.sh's outlive their subshell.

// The suite's flags (setup.sh's cluster_cidrs, sync_period, min_sync_period).
const (
	clusterCIDRs  = "10.244.0.0/16,2001:db8:244::/48"
	syncPeriod    = 10 * time.Second
	minSyncPeriod = 100 * time.Millisecond
)

// proxierRun is how one daemon is started: its kubeconfig (empty: the
// proxier's own, PROXIER_KUBECONFIG), whether --cluster-cidr is given, and
// flags after the suite's and E2E_PROXIER_ARGS.
type proxierRun struct {
	kubeconfig    string
	noClusterCIDR bool
	extra         []string
	stopped       bool          // not running: stopped by the scenario
	syncWithin    time.Duration // how long its first full sync may take (0: 120 s)
	// config, when set, is kube-proxy's configuration file: the daemon runs
	// as kube-proxy's DaemonSet runs kube-proxy, `--config FILE
	// --hostname-override NODE`, without the suite's flags.
	config string
	// binary, when set, is the ipvsproxy run instead of this checkout's
	// (the previous release's build, for the upgrade scenario).
	binary string
}

// suiteRun is the daemon as setup.sh starts it.
func (r proxierRun) suiteRun() bool {
	return r.kubeconfig == "" && !r.noClusterCIDR && len(r.extra) == 0 && !r.stopped && r.config == "" && r.binary == ""
}

// args are the daemon's command line after the binary, as start_proxier's.
func (r proxierRun) args(node string) []string {
	if r.config != "" {
		return []string{"run", "--config", r.config, "--hostname-override", node, "--lock-file", nodeLock(node)}
	}
	kubeconfig := r.kubeconfig
	if kubeconfig == "" {
		kubeconfig = os.Getenv("PROXIER_KUBECONFIG")
	}
	args := []string{"run", "--kubeconfig", kubeconfig, "--hostname-override", node, "--lock-file", nodeLock(node)}
	if !r.noClusterCIDR {
		args = append(args, "--cluster-cidr", clusterCIDRs)
	}
	args = append(args, "--ipvs-sync-period", syncPeriod.String(), "--ipvs-min-sync-period", minSyncPeriod.String())
	args = append(args, strings.Fields(os.Getenv("E2E_PROXIER_ARGS"))...)
	return append(args, r.extra...)
}

// nodeLock is lib.sh's node_lock: every node is a namespace of one kernel
// with one /run, so each daemon gets a lock file of its own.
func nodeLock(node string) string { return "/run/ipvsproxy-" + node + ".lock" }

func proxierLog(node string) string { return filepath.Join(guest.logs, "ipvsproxy-"+node+".log") }
func proxierPidFile(node string) string {
	return filepath.Join(guest.logs, "ipvsproxy-"+node+".pid")
}

// proxierPid is the running daemon's pid from its pid file (0: none).
func proxierPid(node string) int {
	b, err := os.ReadFile(proxierPidFile(node))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// started are the daemons this process started, so that stopProxier reaps
// them.
var started = map[int]*exec.Cmd{}

// startProxier starts node's daemon in its namespace, its output appended
// to its log (the file itself, so no pipe ties the daemon to this process).
func startProxier(node string, r proxierRun) (int, error) {
	log, err := os.OpenFile(proxierLog(node), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return 0, err
	}
	defer log.Close()
	header := "--- start " + time.Now().UTC().Format("15:04:05.000000000")
	if !r.suiteRun() {
		header += " " + r.describe()
	}
	fmt.Fprintln(log, header)
	bin := ipvsproxyBin()
	if r.binary != "" {
		bin = r.binary
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", node, bin}, r.args(node)...)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s's proxier: %w", node, err)
	}
	// ip netns exec execs the program: this is the daemon's pid.
	pid := cmd.Process.Pid
	started[pid] = cmd
	if err := os.WriteFile(proxierPidFile(node), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return pid, err
	}
	return pid, nil
}

// describe is what differs from the suite's run, for the log and the
// transcript.
func (r proxierRun) describe() string {
	var parts []string
	if r.binary != "" {
		parts = append(parts, "(the binary "+filepath.Base(r.binary)+")")
	}
	if r.config != "" {
		parts = append(parts, "--config "+r.config)
	}
	if r.kubeconfig != "" {
		parts = append(parts, "--kubeconfig "+filepath.Base(r.kubeconfig))
	}
	if r.noClusterCIDR {
		parts = append(parts, "(no --cluster-cidr)")
	}
	return strings.Join(append(parts, r.extra...), " ")
}

// stopProxier sends sig to node's daemon and waits up to 30 s until it is
// gone (or a zombie: setup.sh's are the children of guest.sh's subshell).
func stopProxier(node string, sig syscall.Signal) error {
	pid := proxierPid(node)
	if pid == 0 {
		return nil
	}
	_ = syscall.Kill(pid, sig)
	if cmd := started[pid]; cmd != nil {
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
		delete(started, pid)
	}
	if ok, _ := waitUntil(30*time.Second, func() (bool, string) { return !alive(pid), "" }); !ok {
		return fmt.Errorf("%s's proxier (pid %d) still runs 30 s after SIG%s", node, pid, strings.ToUpper(sig.String()))
	}
	return os.Remove(proxierPidFile(node))
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command's closing parenthesis.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// proxierSynced is setup.sh's proxier_synced: the daemon finished its first
// (full) sync. (/healthz is no sign: like kube-proxy's it answers 200
// before the first sync.)
func proxierSynced(node string) bool {
	n, ok := metric(node, "ipvsproxy_sync_full_total")
	return ok && n >= 1
}

// waitProxierSynced waits until node's daemon pid finished its first full
// sync; it fails at once when the daemon exits.
func waitProxierSynced(node string, pid int, limit time.Duration) error {
	ok, last := waitUntil(limit, func() (bool, string) {
		if !alive(pid) {
			return true, "exited"
		}
		return proxierSynced(node), "did not sync"
	})
	if ok && alive(pid) && proxierSynced(node) {
		return nil
	}
	if ok {
		last = "exited"
	}
	tail := run("-", "tail -n 2 "+proxierLog(node)).Out
	return fmt.Errorf("%s's proxier (%s) %s within %s: %s", node, describeOrSuite(proxierRuns[node]), last, limit, oneline(tail))
}

func describeOrSuite(r proxierRun) string {
	if r.stopped {
		return "stopped"
	}
	if r.suiteRun() {
		return "the suite's flags"
	}
	return r.describe()
}

// proxierRuns is how each node's daemon was last started by this process
// (absent: as setup.sh started it).
var proxierRuns = map[string]proxierRun{}

// guarded are the nodes whose daemon a scenario stopped: it puts them back
// on the suite's flags when it ends.
var guarded = map[*S]map[string]bool{}

// StopProxier stops node's daemon with sig as stop_proxier does. Whatever
// fails after, the scenario ends with the daemon running on the suite's
// flags again.
func (v *V) StopProxier(node string, sig syscall.Signal) {
	v.guard(node)
	v.Must(stopProxier(node, sig))
	proxierRuns[node] = proxierRun{stopped: true}
}

// StartProxier starts node's daemon as r says and waits up to 120 s for its
// first full sync (r.syncWithin); it returns the daemon's pid.
func (v *V) StartProxier(node string, r proxierRun) int {
	pid := v.LaunchProxier(node, r)
	limit := r.syncWithin
	if limit == 0 {
		limit = 120 * time.Second
	}
	v.Must(waitProxierSynced(node, pid, limit))
	return pid
}

// LaunchProxier starts node's daemon as r says without waiting for it.
func (v *V) LaunchProxier(node string, r proxierRun) int {
	v.guard(node)
	pid, err := startProxier(node, r)
	proxierRuns[node] = r
	v.Must(err)
	v.Show(node, "ipvsproxy run ... "+describeOrSuite(r)+" &", "")
	return pid
}

// RestartProxier is the bash scenarios' restart_proxier_with: node's daemon
// stopped (SIGTERM), started as r says, synced within 120 s.
func (v *V) RestartProxier(node string, r proxierRun) int {
	v.StopProxier(node, syscall.SIGTERM)
	return v.StartProxier(node, r)
}

// RestoreProxier puts node's daemon back on the suite's flags, a check of
// the step (the bash scenarios ended so): synced within 120 s.
func (v *V) RestoreProxier(node string) {
	v.Must(restoreProxier(node, 120*time.Second))
}

// RestoreProxierWithin is RestoreProxier with another limit for the sync.
func (v *V) RestoreProxierWithin(node string, limit time.Duration) {
	v.Must(restoreProxier(node, limit))
}

func (v *V) guard(node string) {
	s := v.s
	if guarded[s] == nil {
		guarded[s] = map[string]bool{}
	}
	if guarded[s][node] {
		return
	}
	guarded[s][node] = true
	s.t.Cleanup(func() {
		if r, ok := proxierRuns[node]; ok && (!r.suiteRun() || !alive(proxierPid(node))) {
			if err := restoreProxier(node, 120*time.Second); err != nil {
				s.t.Errorf("clean-up: %v", err)
			}
		}
	})
}

func restoreProxier(node string, limit time.Duration) error {
	if err := stopProxier(node, syscall.SIGTERM); err != nil {
		return err
	}
	proxierRuns[node] = proxierRun{stopped: true}
	pid, err := startProxier(node, proxierRun{})
	if err != nil {
		return err
	}
	proxierRuns[node] = proxierRun{}
	return waitProxierSynced(node, pid, limit)
}
