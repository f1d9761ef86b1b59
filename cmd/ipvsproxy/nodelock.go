package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/nodelock"
	"github.com/urfave/cli/v2"
	"k8s.io/klog/v2"
)

// defaultLockTimeout outlasts the DaemonSet's terminationGracePeriodSeconds
// (30s): a pod replacing one that is still stopping waits for it instead of
// failing. A holder that stays (a force-deleted pod whose kubelet is cut
// off, a static pod, a manual run) makes the start fail with its pid, and
// the kubelet's restarts keep that message in front of the operator.
const defaultLockTimeout = time.Minute

// nodeLockFlags are the flags of `run` and `cleanup` for the node lock.
func nodeLockFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "lock-file", EnvVars: envOf("lock-file"), Value: nodelock.DefaultPath, Usage: "the host file whose flock(2) lets one ipvsproxy (run or cleanup) at a time write the node's kernel state; the holder's pid is written into it. ipvsproxy creates it 0600 and refuses one another user could open or replace. The DaemonSet mounts the host's directory " + filepath.Dir(nodelock.DefaultPath)},
		&cli.DurationFlag{Name: "lock-timeout", EnvVars: envOf("lock-timeout"), Value: defaultLockTimeout, Usage: "how long to wait for another ipvsproxy on the node to release --lock-file before exiting with its pid; 0 does not wait"},
	}
}

// takeNodeLock takes the node lock before anything touches the kernel; the
// caller releases it when it is done with the kernel.
func takeNodeLock(ctx context.Context, c *cli.Context) (*nodelock.Lock, error) {
	path, timeout := c.String("lock-file"), c.Duration("lock-timeout")
	if path == "" {
		return nil, fmt.Errorf("--lock-file must name a file: without the lock two instances on one node would undo each other's kernel writes")
	}
	if timeout < 0 {
		return nil, fmt.Errorf("--lock-timeout=%v must not be negative", timeout)
	}
	return nodelock.Acquire(ctx, path, timeout, func(holderPID int) {
		klog.InfoS("Waiting for another ipvsproxy on this node to release the node lock", "lockFile", path, "holderPID", holderPID, "timeout", timeout)
	})
}
