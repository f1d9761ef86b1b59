package shape

// The operations both proxiers are timed on, in report order.
const (
	OpCold           = "cold full sync"
	OpEndpointAdd    = "one endpoint added"
	OpEndpointRemove = "one endpoint removed"
	OpServiceAdd     = "one Service added"
	OpNoop           = "no-op sync"
	OpFullResync     = "periodic full resync"
	OpShareResync    = "periodic resync, 1 of 10 shares"
	OpResyncCycle    = "periodic resync, average of 10 periods"
	OpRestart        = "restart adoption"
	OpChurn          = "1% of endpoints churned"
)

// ResyncShares is ipvsproxy's --ipvs-resync-shares for OpShareResync: one
// period between two full ones re-reads a tenth of the virtual servers.
// OpShareResync times one such period; OpResyncCycle averages ten periods
// in a row, the full one among them, which is what the re-check costs over
// time (for kube-proxy, whose every period is full, one period).
const ResyncShares = 10

// Ops lists the operations in report order.
var Ops = []string{OpCold, OpEndpointAdd, OpEndpointRemove, OpServiceAdd, OpNoop, OpFullResync, OpShareResync, OpResyncCycle, OpRestart, OpChurn}

// Result is what one process measured on one shape: the durations of each
// operation in milliseconds (one per repeat), the kernel writes of its
// last run where the side counts them, and the process's peak RSS.
type Result struct {
	Side     string               `json:"side"` // "ipvsproxy" or "kube-proxy"
	Shape    string               `json:"shape"`
	Services int                  `json:"services"`
	Millis   map[string][]float64 `json:"millis"`
	Writes   map[string]int       `json:"writes,omitempty"`
	PeakRSS  float64              `json:"peak_rss_mb"`
	// ColdCalls is the cold sync's wall time per kind of kernel call
	// ("ipvs AddRealServer": milliseconds and calls), where the side
	// measures it (tier 2); the rest of the cold sync is the side's own work.
	ColdCalls map[string]CallTime `json:"cold_calls,omitempty"`
	// OpCalls is the same for every operation, each summed over its
	// repeats (ColdCalls is its cold sync's).
	OpCalls map[string]map[string]CallTime `json:"op_calls,omitempty"`
	Notes   []string                       `json:"notes,omitempty"`
}

// CallTime is the time spent in one kind of kernel call.
type CallTime struct {
	Millis float64 `json:"ms"`
	Calls  int     `json:"calls"`
}

// Churned lists the Services one endpoint of which the churn of repeat rep
// replaces: every tenth, so 1% of all endpoints with 10 per Service; never
// the one the single-endpoint operations change (Services/2), so those
// stay one write per virtual server.
func Churned(s Shape, rep int) []int {
	var out []int
	for i := 1 + rep%9; i < s.Services; i += 10 {
		if i != s.Services/2 {
			out = append(out, i)
		}
	}
	return out
}
