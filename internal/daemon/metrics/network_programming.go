package metrics

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// ObserveNetworkProgramming records, once the sync that programmed them has
// finished at synced, the latency of each trigger time of family.
func (m *Metrics) ObserveNetworkProgramming(family v1.IPFamily, triggers []time.Time, synced time.Time) {
	observer := m.NetworkProgrammingLatency.WithLabelValues(string(family))
	for _, t := range triggers {
		if t.IsZero() {
			continue
		}
		observer.Observe(synced.Sub(t).Seconds())
	}
}
