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

	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"golang.org/x/sys/unix"
)

// TestMain runs this binary as a lock holder when NODELOCK_TEST_HOLD names a
// file: two processes are needed, because flock(2) locks belong to open
// file descriptions and the kernel frees them when their process dies. The
// holder prints "waiting <pid>" if it had to wait, then "locked", and holds
// the lock until its stdin closes.
func TestMain(m *testing.M) {
	if path := os.Getenv("NODELOCK_TEST_TAKE_READONLY"); path != "" {
		takeReadOnly(path)
		return
	}
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

// takeReadOnly is what a local user can do with a lock file they may read:
// open it read-only and flock it, which needs no write access. It prints
// "held" and holds the lock until stdin closes, or "refused: ERR".
func takeReadOnly(path string) {
	f, err := os.Open(path)
	if err == nil {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	if err != nil {
		fmt.Println("refused:", err)
		os.Exit(0)
	}
	fmt.Println("held")
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// nobody is the unprivileged user of Debian's base-passwd.
const nobody = 65534

// publicDir is a directory like the host's /run: root's, 0755, so that any
// user may look up the lock file in it and only its mode decides who opens
// it. The test binary is copied into it, where nobody may run it.
func publicDir(t *testing.T) (dir, binary string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "nodelock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	binary = filepath.Join(dir, "nodelock.test")
	if err := os.WriteFile(binary, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, binary
}

// A local user cannot hold the node lock: the file ipvsproxy creates is
// root's and 0600, so an unprivileged process (uid nobody, as a shell user
// or a pod's process would be) cannot even open it, and a root process
// takes it at once after. The file was once created 0644: a user opened it
// read-only, held the flock across a restart, and the daemon exited after
// its wait, again and again.
func TestUnprivilegedUserCannotHoldTheLock(t *testing.T) {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.NotRoot, "needs root to run a process as another user")
	}
	dir, binary := publicDir(t)
	path := filepath.Join(dir, "ipvsproxy.lock")
	lock, err := Acquire(context.Background(), path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	lock.Release()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 0 || st.Mode&0o777 != 0o600 {
		t.Errorf("the lock file is uid %d mode %04o, want root's 0600", st.Uid, st.Mode&0o777)
	}

	user := exec.Command(binary)
	user.Env = append(os.Environ(), "NODELOCK_TEST_TAKE_READONLY="+path)
	user.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	stdin, err := user.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := user.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := user.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = user.Wait() })
	said, _ := bufio.NewReader(stdout).ReadString('\n')
	t.Logf("uid %d: %s", nobody, strings.TrimSpace(said))
	if !strings.HasPrefix(said, "refused:") || !strings.Contains(said, "permission denied") {
		t.Errorf("uid %d said %q, want a refused open", nobody, said)
	}
	if lock, err := Acquire(context.Background(), path, 200*time.Millisecond, nil); err != nil {
		t.Errorf("root after the user's try: %v", err)
	} else {
		lock.Release()
	}
}

// A lock file another user could open or replace is refused before it is
// locked, with an error naming the file and what to do; one that is fine
// is taken. kubelet's hostPath FileOrCreate makes files 0644, which is why
// the DaemonSet mounts the directory and ipvsproxy makes the file.
func TestLockFileOthersCouldOpenIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.NotRoot, "needs root to make files of another user")
	}
	for _, c := range []struct {
		name    string
		dirMode os.FileMode
		setup   func(path string) error
		refused string // in the error; "" when taken
	}{
		{"made 0644, as a hostPath FileOrCreate", 0o755, func(p string) error { return os.WriteFile(p, nil, 0o644) }, "mode 0644"},
		{"group-writable", 0o755, func(p string) error { return writeMode(p, 0o620) }, "mode 0620"},
		{"another user's", 0o755, func(p string) error {
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				return err
			}
			return os.Chown(p, nobody, nobody)
		}, "owned by uid 65534"},
		{"in a directory anyone may write", 0o777, func(p string) error { return os.WriteFile(p, nil, 0o600) }, "anyone may replace"},
		{"a symbolic link", 0o755, func(p string) error { return os.Symlink("/etc/passwd", p) }, "symbolic link"},
		{"root's 0600", 0o755, func(p string) error { return os.WriteFile(p, nil, 0o600) }, ""},
		{"root's 0600 in a sticky directory", os.ModeSticky | 0o777, func(p string) error { return os.WriteFile(p, nil, 0o600) }, ""},
		{"made by ipvsproxy", 0o755, func(string) error { return nil }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := publicDir(t)
			if err := os.Chmod(dir, c.dirMode); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "ipvsproxy.lock")
			if err := c.setup(path); err != nil {
				t.Fatal(err)
			}
			lock, err := Acquire(context.Background(), path, 0, nil)
			switch {
			case c.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.refused == "":
				lock.Release()
			case err == nil:
				lock.Release()
				t.Fatalf("taken, want an error saying %q", c.refused)
			case !errors.Is(err, ErrUnsafeLockFile) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.refused):
				t.Fatalf("error %q, want ErrUnsafeLockFile naming %s and saying %q", err, path, c.refused)
			default:
				t.Logf("%v", err)
			}
		})
	}
}

// writeMode makes an empty file with exactly mode (the umask cleared).
func writeMode(path string, mode os.FileMode) error {
	if err := os.WriteFile(path, nil, mode); err != nil {
		return err
	}
	return os.Chmod(path, mode)
}

// The lock is on the file the path names when it is taken: a file removed
// (or replaced) under a waiting process is not locked in place of the new
// one, so two processes never both believe they hold "the" lock.
func TestLockOfAReplacedFileIsTakenAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipvsproxy.lock")
	first := startHolder(t, path, 0)
	first.expect(t, "locked")
	second := startHolder(t, path, time.Minute)
	second.expect(t, "waiting "+strconv.Itoa(first.cmd.Process.Pid))
	// An operator removes the file and a third process makes a new one
	// and holds it; then the first one goes.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	third := startHolder(t, path, 0)
	third.expect(t, "locked")
	first.stdin.Close()
	<-first.done
	select {
	case line := <-second.lines:
		t.Fatalf("the second process said %q while the third holds the file the path names", line)
	case <-time.After(time.Second):
	}
	third.stdin.Close()
	<-third.done
	second.expect(t, "locked")
}
