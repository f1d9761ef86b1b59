package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/nodelock"
	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
)

// holdNodeLock is this test binary run as a first ipvsproxy
// (IPVSPROXY_TEST_HOLD_LOCK): it takes the lock, says "locked" and holds it
// until its stdin closes.
func holdNodeLock(path string) {
	lock, err := nodelock.Acquire(context.Background(), path, 0, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = lock.Release()
	os.Exit(0)
}

// A second `ipvsproxy run` or `cleanup` on a node whose lock another one
// holds exits naming the holder's pid before touching the kernel, or, given
// time, waits and then does its work. Each runs whole (main) in a network
// namespace of its own, so that a command that ignored the lock would write
// only there.
func TestSecondInstanceWaitsForTheNodeLock(t *testing.T) {
	kerneltest.RequireRootAndTools(t, "ip", "ipset", "iptables")
	_, nsPath := netnstest.NewNamed(t, "ipvsproxy-lk-")
	ns := strings.TrimPrefix(nsPath, "/run/netns/")
	sh := netnstest.Shell(t, nsPath)
	// ipvsproxy's state: a set of a name it shares with kube-proxy and its
	// ownership record.
	sh("ipset create KUBE-CLUSTER-IP hash:ip,port; ipset create KUBE-IPVS-OWNED hash:ip,port")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lockFile := filepath.Join(dir, "ipvsproxy.lock")

	// The first instance.
	holder := exec.Command(self)
	holder.Env = append(os.Environ(), "IPVSPROXY_TEST_HOLD_LOCK="+lockFile)
	release, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "locked\n" {
		t.Fatalf("the holder said %q", line)
	}
	holderPID := "pid " + strconv.Itoa(holder.Process.Pid)

	second := func(ctx context.Context, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, self}, args...)...)
		cmd.Env = append(os.Environ(), "IPVSPROXY_TEST_AS_MAIN=1", "IPVSPROXY_LOCK_FILE="+lockFile)
		return cmd
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	kubeconfig := filepath.Join(dir, "kubeconfig")
	// An API server nobody answers for: run must stop at the lock, before
	// it would wait for informers.
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://192.0.2.1:6443"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"cleanup", "--lock-timeout=300ms"},
		{"cleanup", "--kube-proxy-leftovers", "--lock-timeout=300ms"},
		{"run", "--lock-timeout=300ms", "--kubeconfig=" + kubeconfig, "--hostname-override=node1", "--ip-families=IPv4", "--metrics-bind-address=", "--healthz-bind-address=127.0.0.1:0"},
	} {
		runCtx, stop := context.WithTimeout(ctx, 20*time.Second)
		start := time.Now()
		out, err := second(runCtx, args...).CombinedOutput()
		stop()
		if err == nil || !strings.Contains(string(out), holderPID) || !strings.Contains(string(out), lockFile) {
			t.Errorf("ipvsproxy %s while %s holds the lock: %v after %v, want an exit naming the holder and the file:\n%s", strings.Join(args, " "), holderPID, err, time.Since(start).Round(time.Millisecond), out)
		}
	}
	if sets := sh("ipset list -n"); !strings.Contains(sets, "KUBE-CLUSTER-IP") {
		t.Fatalf("a cleanup refused the lock removed the set anyway:\n%s", sets)
	}

	// Given time, cleanup waits for the holder, then cleans.
	waiting := second(ctx, "cleanup", "--lock-timeout=50s")
	stderr, err := waiting.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := waiting.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stderr)
	var said []string
	for lines.Scan() {
		said = append(said, lines.Text())
		if strings.Contains(lines.Text(), "Waiting for another ipvsproxy") {
			break
		}
	}
	if !strings.Contains(strings.Join(said, "\n"), "holderPID="+strconv.Itoa(holder.Process.Pid)) {
		t.Fatalf("cleanup did not say it waits for %s:\n%s", holderPID, strings.Join(said, "\n"))
	}
	if sets := sh("ipset list -n"); !strings.Contains(sets, "KUBE-CLUSTER-IP") {
		t.Fatalf("cleanup cleaned while waiting for the lock:\n%s", sets)
	}
	release.Close() // the first instance exits
	rest, _ := io.ReadAll(stderr)
	if err := waiting.Wait(); err != nil {
		t.Fatalf("cleanup after the holder left: %v\n%s\n%s", err, strings.Join(said, "\n"), rest)
	}
	if sets := sh("ipset list -n"); strings.Contains(sets, "KUBE-") {
		t.Errorf("cleanup that waited for the lock did not clean:\n%s", sets)
	}
	// ip netns exec execs the command: its pid is cleanup's.
	if got, want := nodelock.HolderPID(lockFile), waiting.Process.Pid; got != want {
		t.Errorf("the lock file names pid %d after cleanup held it, want cleanup's %d", got, want)
	}
}
