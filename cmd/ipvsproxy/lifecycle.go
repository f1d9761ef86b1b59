package main

import (
	"context"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/healthcheck"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/urfave/cli/v2"
	"k8s.io/klog/v2"
)

// bindRetryInterval is how long a server whose address is busy waits before
// trying again, as kube-proxy's serveHealthz and serveMetrics do.
const bindRetryInterval = 5 * time.Second

// serveRetrying runs serve (which listens on addr, then serves until ctx
// ends) and tries again every bindRetryInterval when it fails: a busy
// --healthz-bind-address, --metrics-bind-address or --inspect-bind-address (the old kube-proxy still
// running during a migration, a port another daemon took) is logged, not
// fatal, as in kube-proxy. With hardFail (--bind-address-hard-fail) the first
// failure goes to errs instead and the daemon exits.
func serveRetrying(ctx context.Context, what, addr string, hardFail bool, serve func(context.Context) error, errs chan<- error) {
	for {
		err := serve(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			// Serve returns nil only once ctx is done; be safe anyway.
			return
		}
		if hardFail {
			errs <- err
			return
		}
		klog.ErrorS(err, "Serving failed; retrying", "server", what, "address", addr, "retryIn", bindRetryInterval)
		select {
		case <-ctx.Done():
			return
		case <-time.After(bindRetryInterval):
		}
	}
}

// startSyncLoop runs p's sync loop until ctx ends. The channel closes once
// the loop has returned, which it does only after the sync in flight has
// finished: the caller closes the kernel handles after that, never under a
// sync (a write on a closed netlink socket would leave that sync half
// applied). Stopping removes nothing from the kernel: the next daemon adopts
// the state, and traffic keeps flowing meanwhile.
func startSyncLoop(ctx context.Context, p *proxier.Proxier) <-chan struct{} {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		p.Run(ctx)
	}()
	return stopped
}

// markProgrammed makes /readyz true after the first full sync that ran
// through (the hook observeSync calls). One object the kernel refuses is
// retried and reported on its own; it must not hold every node's rollout.
func markProgrammed(r proxier.SyncResult, programmed func()) {
	if r.Full && r.Completed {
		programmed()
	}
}

// serveHealthAndMetrics starts the /healthz server and the metrics and
// inspect listeners, each retried while its address is busy unless
// --bind-address-hard-fail.
func serveHealthAndMetrics(ctx context.Context, c *cli.Context, health *healthcheck.ProxyHealth, status []statusServer, errs chan<- error) {
	hardFail := c.Bool("bind-address-hard-fail")
	healthAddr := c.String("healthz-bind-address")
	go serveRetrying(ctx, "healthz", healthAddr, hardFail, func(ctx context.Context) error {
		return healthcheck.ServeProxyHealth(ctx, healthAddr, health)
	}, errs)
	for _, s := range status {
		go serveRetrying(ctx, s.what, s.addr, hardFail, s.serve, errs)
	}
}
