package iptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/vishvananda/netns"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/nsthread"
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
	target, err := netns.GetFromPath(r.netnsPath)
	if err != nil {
		return commandResult{}, fmt.Errorf("open network namespace %s: %w", r.netnsPath, err)
	}
	defer target.Close()
	var res commandResult
	if e := nsthread.Do(target, func() { res, err = execute(stdin, name, args...) }); e != nil {
		return res, fmt.Errorf("%s: %w", r.netnsPath, e)
	}
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
