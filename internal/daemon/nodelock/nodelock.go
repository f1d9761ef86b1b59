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
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultPath is in a directory of its own on the host's /run (a tmpfs): a
// lock file left by a crash is gone at the next boot, and the kernel drops
// the lock itself when its holder dies, however it dies. The DaemonSet
// mounts the directory, not the file: kubelet creates a hostPath file
// (FileOrCreate) 0644, which any local user may open and flock, and a file
// bind-mounted into a pod stays the pod's inode after it is removed on the
// host. In the directory ipvsproxy creates the file itself, 0600.
const DefaultPath = "/run/ipvsproxy/node.lock"

// pollInterval is how often a waiting process tries again. flock has no
// timeout of its own, and a blocked flock cannot be cancelled.
const pollInterval = 100 * time.Millisecond

// ErrHeld is what a HeldError matches with errors.Is.
var ErrHeld = errors.New("the node lock is held by another process")

// ErrUnsafeLockFile: the lock file, or its directory, lets another user
// open or replace it, and so hold the lock and keep ipvsproxy from
// starting. It is refused, never locked.
var ErrUnsafeLockFile = errors.New("another user could hold the node lock")

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

// Acquire takes the lock at path, creating the file (0600) if needed, and
// writes the caller's pid into it. While another process holds it, Acquire
// tries again until timeout has passed (0: once) or ctx ends, and calls
// waiting once with the holder's pid (0 if unknown) so the wait is logged.
// The descriptor is close-on-exec: a daemon that re-executes itself releases
// the lock and takes it again.
//
// A file that another user could open (not ours, or readable or writable
// beyond its owner), a symbolic link, or a file in a directory others may
// write without the sticky bit is refused with ErrUnsafeLockFile: flock
// needs only read access, so such a user could hold the lock for as long
// as they like. The check is on the descriptor that is locked (fstat), so
// nothing can be swapped in between. Once locked, the path must still name
// that file: if it was removed or replaced meanwhile, the lock is on a file
// nobody else will open, and Acquire starts again on the new one.
func Acquire(ctx context.Context, path string, timeout time.Duration, waiting func(holderPID int)) (*Lock, error) {
	start := time.Now()
	told := false
	for {
		f, err := openPrivate(path)
		if err != nil {
			return nil, err
		}
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
		if still, err := namesFile(path, f); err != nil {
			f.Close()
			return nil, err
		} else if !still {
			f.Close()
			continue
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
}

// openPrivate opens (or creates, 0600) the lock file and refuses it unless
// only its owner, the caller, may open it and nobody else may replace it.
func openPrivate(path string) (*os.File, error) {
	dir := filepath.Dir(path)
	if dir == filepath.Dir(DefaultPath) {
		// The default's directory is ipvsproxy's: made here when a node
		// runs ipvsproxy outside the DaemonSet, which mounts it.
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("open the node lock %s: %w", path, err)
		}
	}
	var ds unix.Stat_t
	if err := unix.Stat(dir, &ds); err != nil {
		return nil, fmt.Errorf("open the node lock %s: %w", path, err)
	}
	if ds.Mode&0o022 != 0 && ds.Mode&unix.S_ISVTX == 0 {
		return nil, fmt.Errorf("%w: %s is in %s (mode %04o), where anyone may replace it: give --lock-file a path in a directory only root may write (the default %s)",
			ErrUnsafeLockFile, path, dir, ds.Mode&0o7777, DefaultPath)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%w: %s is a symbolic link; remove it (ipvsproxy creates the file itself, 0600)", ErrUnsafeLockFile, path)
	}
	if err != nil {
		return nil, fmt.Errorf("open the node lock %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("open the node lock %s: %w", path, err)
	}
	var why string
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		why = fmt.Sprintf("is not a regular file (mode %#o)", st.Mode)
	case int(st.Uid) != os.Geteuid():
		why = fmt.Sprintf("is owned by uid %d, not %d", st.Uid, os.Geteuid())
	case st.Mode&0o077 != 0:
		why = fmt.Sprintf("has mode %04o: others may open it", st.Mode&0o7777)
	}
	if why != "" {
		f.Close()
		return nil, fmt.Errorf("%w: %s %s, and flock needs only read access; remove it while no ipvsproxy runs on the node (ipvsproxy creates it itself, 0600)",
			ErrUnsafeLockFile, path, why)
	}
	return f, nil
}

// namesFile reports whether path still names the file f.
func namesFile(path string, f *os.File) (bool, error) {
	held, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("lock %s: %w", path, err)
	}
	now, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lock %s: %w", path, err)
	}
	return os.SameFile(held, now), nil
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
