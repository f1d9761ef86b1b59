package main

import (
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/metrics"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
)

// observeSyncKind feeds kube-proxy's full/partial sync histograms.
func observeSyncKind(m *metrics.Metrics, family string, r proxier.SyncResult) {
	if r.Full {
		m.SyncFullProxyRulesLatency.WithLabelValues(family).Observe(r.Duration.Seconds())
	} else {
		m.SyncPartialProxyRulesLatency.WithLabelValues(family).Observe(r.Duration.Seconds())
	}
}

// observeByFamily counts conntrack deletions and iptables failures under the
// family they happened in (not under the first family of the node).
func observeByFamily(m *metrics.Metrics, r proxier.SyncResult) {
	for family, pass := range r.Conntrack {
		f := string(family)
		m.ConntrackEntriesDeletedTotal.WithLabelValues(f).Add(float64(pass.Deleted))
		m.ConntrackReconcilerDeletedEntriesTotal.WithLabelValues(f).Add(float64(pass.Deleted))
		m.ConntrackReconcilerSyncDuration.WithLabelValues(f).Observe(pass.Duration.Seconds())
	}
	for family, n := range r.IPTablesFailures {
		m.IPTablesRestoreFailuresTotal.WithLabelValues(string(family)).Add(float64(n))
	}
}
