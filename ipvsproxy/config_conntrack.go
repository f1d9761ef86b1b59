package ipvsproxy

import (
	"fmt"
	"time"
)

// ConntrackSettings are kube-proxy's conntrack knobs
// (KubeProxyConfiguration.conntrack, --conntrack-*). kube-proxy writes them
// at every start (pkg/proxy/conntrack/sysctls.go), so a node that reboots
// keeps them; a drop-in that did not would leave nodes on the kernel's
// defaults (nf_conntrack_max sized for the RAM, 5-day established timeout).
type ConntrackSettings struct {
	// MaxPerCore × CPUs, but at least Min, capped at 1048576 like
	// kube-proxy, becomes nf_conntrack_max; MaxPerCore 0 leaves it.
	MaxPerCore, Min int
	// CPUs is the number of logical CPUs; 0 counts them.
	CPUs int
	// Timeouts in seconds on the kernel side; 0 leaves the kernel's.
	TCPEstablishedTimeout, TCPCloseWaitTimeout time.Duration
	// TCPBeLiberal sets nf_conntrack_tcp_be_liberal=1 (out-of-window packets
	// are not marked INVALID); false leaves the kernel's value.
	TCPBeLiberal                 bool
	UDPTimeout, UDPStreamTimeout time.Duration
}

// DefaultConntrack is kube-proxy's defaulting of conntrack (v1alpha1
// defaults.go).
func DefaultConntrack() ConntrackSettings {
	return ConntrackSettings{
		MaxPerCore:            32 * 1024,
		Min:                   128 * 1024,
		TCPEstablishedTimeout: 24 * time.Hour,
		TCPCloseWaitTimeout:   time.Hour,
	}
}

func (s ConntrackSettings) validate() []error {
	var errs []error
	if s.MaxPerCore < 0 || s.Min < 0 {
		errs = append(errs, fmt.Errorf("--conntrack-max-per-core=%d and --conntrack-min=%d must not be negative", s.MaxPerCore, s.Min))
	}
	for name, d := range map[string]time.Duration{"tcp-timeout-established": s.TCPEstablishedTimeout, "tcp-timeout-close-wait": s.TCPCloseWaitTimeout, "udp-timeout": s.UDPTimeout, "udp-timeout-stream": s.UDPStreamTimeout} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("--conntrack-%s=%v must not be negative", name, d))
		}
	}
	return errs
}
