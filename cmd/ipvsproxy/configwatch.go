package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// configWatchInterval is how often --config is re-read. A ConfigMap volume
// is updated by the kubelet within about a minute and by an atomic swap of a
// symlink, which inotify on the file itself misses; reading a small file
// every few seconds sees every kind of update.
const configWatchInterval = 2 * time.Second

// watchConfigFile calls changed once the content of the source's file
// differs from what the running configuration was read from and would
// start (source.accepts). kube-proxy exits when its file
// changes and lets the kubelet start it again; here the daemon restarts
// itself (see restartSelf), so there is no CrashLoopBackOff delay, and a
// broken edit is logged and waited out instead of taking the node's proxy
// down: the running configuration stays until the file is valid again.
func watchConfigFile(ctx context.Context, source configSource, interval time.Duration, changed func()) {
	path, sum := source.path, source.sum
	if path == "" {
		return
	}
	go func() {
		var refused [sha256.Size]byte
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			data, err := os.ReadFile(path)
			if err != nil {
				klog.ErrorS(err, "Reading the configuration file; keeping the running configuration", "file", path)
				continue
			}
			now := sha256.Sum256(data)
			if bytes.Equal(now[:], sum[:]) || bytes.Equal(now[:], refused[:]) {
				continue
			}
			if err := source.accepts(data); err != nil {
				refused = now
				klog.ErrorS(err, "The configuration file changed but is not valid; keeping the running configuration", "file", path)
				continue
			}
			klog.InfoS("The configuration file changed; restarting to apply it", "file", path)
			changed()
			return
		}
	}()
}

// restartSelf replaces this process by a fresh start of the same binary
// with the same arguments and environment. The kernel state stays, and a
// start adopts it without rewriting (as after any restart), so traffic is
// not interrupted; listening sockets are close-on-exec.
func restartSelf() error {
	klog.Flush()
	// /proc/self/exe is the running binary even if the file was replaced.
	if err := syscall.Exec("/proc/self/exe", os.Args, os.Environ()); err != nil {
		return fmt.Errorf("restart after a configuration change: %w", err)
	}
	return nil
}
