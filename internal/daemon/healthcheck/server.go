package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// ServerLimits bound what one client can cost the daemon. Every node-facing
// listener gets them: the health-check node ports face whatever can reach the
// node, so a slow or silent client must neither pin a goroutine forever nor
// starve the load balancer's probes.
type ServerLimits struct {
	// ReadHeaderTimeout closes a connection that has not sent a full request
	// header in time (the "client that sends nothing" case).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a response.
	WriteTimeout time.Duration
	// IdleTimeout closes a kept-alive connection that sends no next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps the request header size.
	MaxHeaderBytes int
	// MaxConnections caps the connections open at once per server. A new
	// connection is always accepted; beyond the cap one of the client
	// address holding the most is closed, the one longest without progress
	// (connectionShedder), so idle, slow or unread clients cost bounded
	// memory and never starve a probe.
	MaxConnections int
}

// DefaultServerLimits are generous for probes (which send one small GET) and
// tight for anything else.
var DefaultServerLimits = ServerLimits{
	ReadHeaderTimeout: 5 * time.Second,
	ReadTimeout:       10 * time.Second,
	WriteTimeout:      10 * time.Second,
	IdleTimeout:       60 * time.Second,
	MaxHeaderBytes:    16 << 10,
	// About 20 KiB each (two 4 KiB buffers and a goroutine): 5 MiB at most.
	MaxConnections: 256,
}

// Option adjusts the servers of this package and of package metrics. Each
// constructor reads only the options that concern it and ignores the others.
type Option func(*settings)

type settings struct {
	limits        ServerLimits
	nodeName      string
	hostAddresses func() ([]netip.Addr, error)
}

func newSettings(opts []Option) settings {
	s := settings{limits: DefaultServerLimits, hostAddresses: interfaceAddresses}
	for _, opt := range opts {
		opt(&s)
	}
	return s
}

// WithServerLimits replaces DefaultServerLimits.
func WithServerLimits(limits ServerLimits) Option {
	return func(s *settings) { s.limits = limits }
}

// WithNodeName names the node in the FailedToStartServiceHealthcheck event
// message, as kube-proxy does.
func WithNodeName(name string) Option {
	return func(s *settings) { s.nodeName = name }
}

// withHostAddresses replaces the source of the node's own addresses that
// ServiceHealthServer matches against its node address prefixes (by default
// every interface address except the ones on kube-ipvs0, which are Service
// addresses, not node addresses).
func withHostAddresses(list func() ([]netip.Addr, error)) Option {
	return func(s *settings) { s.hostAddresses = list }
}

// newHTTPServer is the one place the limits become an http.Server.
func newHTTPServer(handler http.Handler, limits ServerLimits) *http.Server {
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: limits.ReadHeaderTimeout,
		ReadTimeout:       limits.ReadTimeout,
		WriteTimeout:      limits.WriteTimeout,
		IdleTimeout:       limits.IdleTimeout,
		MaxHeaderBytes:    limits.MaxHeaderBytes,
	}
	// Zero or less means no limit.
	if limits.MaxConnections > 0 {
		srv.ConnState = newConnectionShedder(limits.MaxConnections).track
	}
	return srv
}

// Serve answers handler on ln with the configured limits until ctx is done,
// then shuts down gracefully (bounded by WriteTimeout) and returns nil. It
// returns an error only when serving fails. It always closes ln.
func Serve(ctx context.Context, ln net.Listener, handler http.Handler, opts ...Option) error {
	s := newSettings(opts)
	srv := newHTTPServer(handler, s.limits)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(resettingListener{ln}) }()

	select {
	case err := <-served:
		ln.Close()
		return fmt.Errorf("serve HTTP on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	grace := s.limits.WriteTimeout
	if grace <= 0 {
		grace = DefaultServerLimits.WriteTimeout
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		// Connections still busy after the grace period are cut.
		srv.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve HTTP on %s: %w", ln.Addr(), err)
	}
	return nil
}

// ListenAndServe listens on addr (host:port, TCP) and calls Serve.
func ListenAndServe(ctx context.Context, addr string, handler http.Handler, opts ...Option) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	return Serve(ctx, ln, handler, opts...)
}
