// Package nodelock keeps two ipvsproxy processes from writing one node's
// kernel state at once: an exclusive flock(2) on a host file, as iptables
// does with /run/xtables.lock. Each process records the kernel objects it
// creates (KUBE-IPVS-OWNED); two of them would undo each other's records and
// freeze the virtual servers caught in between, so the second one waits and
// then gives up with the holder's pid. It touches nothing but its own file.
package nodelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultPath is on the host's /run (a tmpfs): a lock file left by a crash
// is gone at the next boot, and the kernel drops the lock itself when its
// holder dies, however it dies.
const DefaultPath = "/run/ipvsproxy.lock"

// pollInterval is how often a waiting process tries again. flock has no
// timeout of its own, and a blocked flock cannot be cancelled.
const pollInterval = 100 * time.Millisecond

// ErrHeld is what a HeldError matches with errors.Is.
var ErrHeld = errors.New("the node lock is held by another process")

// HeldError says who holds the lock a process gave up waiting for.
type HeldError struct {
	Path string
	// HolderPID is the pid the holder wrote into the file, as it sees
	// itself (in a container: in the holder's PID namespace); 0 when the
	// file has none yet.
	HolderPID int
	Waited    time.Duration
}

func (e *HeldError) Error() string {
	holder := "a process that has not written its pid yet"
	if e.HolderPID > 0 {
		holder = "pid " + strconv.Itoa(e.HolderPID)
	}
	return fmt.Sprintf("another ipvsproxy on this node holds %s (%s, written by the holder as it sees itself); gave up after %v: two instances would undo each other's kernel writes", e.Path, holder, e.Waited)
}

func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Lock is a held node lock.
type Lock struct{ file *os.File }

// Acquire takes the lock at path, creating the file if needed, and writes
// the caller's pid into it. While another process holds it, Acquire tries
// again until timeout has passed (0: once) or ctx ends, and calls waiting
// once with the holder's pid (0 if unknown) so the wait is logged. The
// descriptor is close-on-exec: a daemon that re-executes itself releases
// the lock and takes it again.
func Acquire(ctx context.Context, path string, timeout time.Duration, waiting func(holderPID int)) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the node lock %s: %w", path, err)
	}
	start := time.Now()
	told := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		waited := time.Since(start)
		if waited >= timeout {
			f.Close()
			return nil, &HeldError{Path: path, HolderPID: HolderPID(path), Waited: waited.Round(time.Millisecond)}
		}
		if !told && waiting != nil {
			waiting(HolderPID(path))
			told = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for the node lock %s: %w", path, context.Cause(ctx))
		case <-time.After(min(pollInterval, timeout-waited)):
		}
	}
	// Ours now: whatever pid an earlier holder left is replaced.
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("write our pid into the node lock %s: %w", path, err)
	}
	if _, err := f.WriteAt(pid, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("write our pid into the node lock %s: %w", path, err)
	}
	return &Lock{file: f}, nil
}

// Release frees the lock. The file stays: removing it would let a process
// that opened it before the removal and one that creates it anew both hold
// "the" lock.
func (l *Lock) Release() error {
	if l == nil || l.file == nil {
		return nil
	}
	err := l.file.Close()
	l.file = nil
	return err
}

// HolderPID reads the pid the holder wrote into path; 0 when there is none.
func HolderPID(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
