package nodelock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain runs this binary as a lock holder when NODELOCK_TEST_HOLD names a
// file: two processes are needed, because flock(2) locks belong to open
// file descriptions and the kernel frees them when their process dies. The
// holder prints "waiting <pid>" if it had to wait, then "locked", and holds
// the lock until its stdin closes.
func TestMain(m *testing.M) {
	if path := os.Getenv("NODELOCK_TEST_HOLD"); path != "" {
		timeout, _ := time.ParseDuration(os.Getenv("NODELOCK_TEST_TIMEOUT"))
		lock, err := Acquire(context.Background(), path, timeout, func(pid int) { fmt.Printf("waiting %d\n", pid) })
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		fmt.Println("locked")
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = lock.Release()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// holder is a child process taking the lock.
type holder struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr strings.Builder
	// done closes when the process has exited; err is then its exit.
	done chan struct{}
	err  error
}

func startHolder(t *testing.T, path string, timeout time.Duration) *holder {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := &holder{cmd: exec.Command(self), lines: make(chan string, 4), done: make(chan struct{})}
	h.cmd.Env = append(os.Environ(), "NODELOCK_TEST_HOLD="+path, "NODELOCK_TEST_TIMEOUT="+timeout.String())
	h.cmd.Stderr = &h.stderr
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			h.lines <- s.Text()
		}
		close(h.lines)
		h.err = h.cmd.Wait()
		close(h.done)
	}()
	t.Cleanup(func() {
		_ = h.cmd.Process.Kill()
		<-h.done
	})
	return h
}

// expect waits for the holder's next line.
func (h *holder) expect(t *testing.T, want string) {
	t.Helper()
	select {
	case line, ok := <-h.lines:
		if !ok {
			t.Fatalf("pid %d exited before printing %q: %s", h.cmd.Process.Pid, want, h.stderr.String())
		}
		if line != want {
			t.Fatalf("pid %d printed %q, want %q", h.cmd.Process.Pid, line, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("pid %d printed nothing in 10s, want %q", h.cmd.Process.Pid, want)
	}
}

// The second process gives up after its timeout, naming the first one's pid,
// and never takes the lock meanwhile.
func TestSecondProcessExitsNamingTheHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipvsproxy.lock")
	first := startHolder(t, path, 0)
	first.expect(t, "locked")

	second := startHolder(t, path, 300*time.Millisecond)
	second.expect(t, "waiting "+strconv.Itoa(first.cmd.Process.Pid))
	if _, ok := <-second.lines; ok {
		t.Fatal("the second process took the lock the first one holds")
	}
	<-second.done
	err := second.err
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("second process: %v, want exit code 3", err)
	}
	if msg := second.stderr.String(); !strings.Contains(msg, "pid "+strconv.Itoa(first.cmd.Process.Pid)) || !strings.Contains(msg, path) {
		t.Fatalf("second process said %q, want the lock file and the holder's pid %d", msg, first.cmd.Process.Pid)
	}
	if got := HolderPID(path); got != first.cmd.Process.Pid {
		t.Fatalf("the lock file names pid %d, want the holder's %d", got, first.cmd.Process.Pid)
	}
}

// A waiting process takes the lock as soon as the holder is gone, even when
// the holder was killed without releasing it, and writes its own pid.
func TestWaitingProcessTakesTheLockWhenTheHolderDies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipvsproxy.lock")
	first := startHolder(t, path, 0)
	first.expect(t, "locked")

	second := startHolder(t, path, time.Minute)
	second.expect(t, "waiting "+strconv.Itoa(first.cmd.Process.Pid))
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	second.expect(t, "locked")
	if got := HolderPID(path); got != second.cmd.Process.Pid {
		t.Fatalf("the lock file names pid %d, want the new holder's %d", got, second.cmd.Process.Pid)
	}
	// Released on a clean exit too: a third one takes it at once.
	second.stdin.Close()
	if <-second.done; second.err != nil {
		t.Fatalf("second process: %v: %s", second.err, second.stderr.String())
	}
	third := startHolder(t, path, 0)
	third.expect(t, "locked")
}

// A wait ends with the context (SIGTERM during the wait), not the timeout.
func TestWaitEndsWithTheContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipvsproxy.lock")
	first := startHolder(t, path, 0)
	first.expect(t, "locked")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Acquire(ctx, path, time.Minute, nil)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire = %v, want the context's deadline", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("Acquire returned after %v, want at the context's end", waited)
	}
}

// A directory, or a file in a directory that does not exist, is an error
// naming the path, not a wait.
func TestUnusablePathIsAnError(t *testing.T) {
	for _, path := range []string{t.TempDir(), filepath.Join(t.TempDir(), "missing", "ipvsproxy.lock")} {
		_, err := Acquire(context.Background(), path, time.Minute, nil)
		if err == nil || errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), path) {
			t.Errorf("Acquire(%s) = %v, want an error naming the path", path, err)
		}
	}
}
