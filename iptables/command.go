package iptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/vishvananda/netns"
)

// commandTimeout bounds one iptables command. The xtables lock wait is
// bounded separately by "-w"; this only catches a binary that hangs (old
// iptables-nft could loop forever when nf_tables was unusable).
const commandTimeout = time.Minute

// commandRunner runs iptables binaries, in the host network namespace or in
// the one at netnsPath.
type commandRunner struct {
	netnsPath string
}

// commandResult is what a command printed and how it exited.
type commandResult struct {
	stdout   []byte
	stderr   string
	exitCode int
}

// run runs name with args and stdin. It returns an error only when the
// command could not be run at all (ErrUnsupported for a missing binary); a
// non-zero exit is reported in the result for the caller to interpret.
func (r commandRunner) run(stdin []byte, name string, args ...string) (commandResult, error) {
	if r.netnsPath == "" {
		return execute(stdin, name, args...)
	}
	var (
		res  commandResult
		err  error
		done = make(chan struct{})
	)
	// setns(2) switches one thread; a child forked from that thread starts in
	// the namespace. The goroutine owns a locked thread so no other goroutine
	// runs there meanwhile.
	go func() {
		defer close(done)
		runtime.LockOSThread()
		orig, e := netns.Get()
		if e != nil {
			err = fmt.Errorf("get current network namespace: %w", e)
			return
		}
		defer orig.Close()
		target, e := netns.GetFromPath(r.netnsPath)
		if e != nil {
			err = fmt.Errorf("open network namespace %s: %w", r.netnsPath, e)
			runtime.UnlockOSThread()
			return
		}
		defer target.Close()
		if e := netns.Set(target); e != nil {
			err = fmt.Errorf("enter network namespace %s: %w", r.netnsPath, e)
			return
		}
		res, err = execute(stdin, name, args...)
		// Give the thread back only if it is back home; otherwise the
		// runtime ends it when this goroutine returns while still locked.
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
	}()
	<-done
	return res, err
}

func execute(stdin []byte, name string, args ...string) (commandResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := commandResult{stdout: stdout.Bytes(), stderr: cleanStderr(stderr.String())}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, exec.ErrNotFound):
		return res, fmt.Errorf("run %s: %v: %w", name, err, ErrUnsupported)
	case errors.As(err, &exitErr) && ctx.Err() == nil:
		res.exitCode = exitErr.ExitCode()
		return res, nil
	default:
		return res, fmt.Errorf("run %s %s: %w", name, strings.Join(args, " "), err)
	}
}

// cleanStderr keeps what an iptables command said went wrong, on one line,
// without the usage hint ("Try `iptables -h' ...") and the nft back end's
// note about legacy tables.
func cleanStderr(s string) string {
	var kept []string
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "Try `") || strings.HasPrefix(line, "# Warning: iptables-legacy tables present") {
			continue
		}
		kept = append(kept, line)
	}
	return strings.Join(kept, "; ")
}
