package inspect

import "time"

// ConnectionCounts are the IPVS connection counters of a report, keyed as
// the table's rate column looks them up: "PROTO ADDR:PORT" for a virtual
// server, followed by " ADDR:PORT" for one of its real servers.
func ConnectionCounts(r Report) map[string]uint64 {
	out := map[string]uint64{}
	for _, v := range r.VirtualServers {
		key := v.Protocol + " " + hostPort(v.Address, v.Port)
		state := presence(v.InKernel, v.Desired, r.NamesFrom != "" && v.Owner == "ipvsproxy")
		if state != "" {
			key += " " + state
		}
		out[key] = v.Stats.Connections
		for _, rs := range v.RealServers {
			out[key+" "+hostPort(rs.Address, rs.Port)] = rs.Stats.Connections
		}
	}
	return out
}

// Rates are connections per second between two counts taken elapsed apart.
// A counter that went down (a server re-created) starts again from zero.
func Rates(before, after map[string]uint64, elapsed time.Duration) map[string]float64 {
	out := map[string]float64{}
	if elapsed <= 0 {
		return out
	}
	for k, n := range after {
		prev, ok := before[k]
		switch {
		case !ok:
			continue // appeared since the last draw: no rate yet
		case n < prev:
			prev = 0
		}
		out[k] = float64(n-prev) / elapsed.Seconds()
	}
	return out
}
