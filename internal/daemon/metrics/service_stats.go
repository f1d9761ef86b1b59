package metrics

import (
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

var (
	serviceLabels      = []string{"namespace", "service", "port", "protocol"}
	serviceConnections = prometheus.NewDesc("ipvsproxy_service_connections_total",
		"Connections IPVS scheduled to the Service port's endpoints on this node, over its virtual servers (resets when a virtual server is re-created).", serviceLabels, nil)
	servicePackets = prometheus.NewDesc("ipvsproxy_service_packets_total",
		"Packets through the Service port's virtual servers on this node, by direction (in: from clients, out: replies).", append(serviceLabels, "direction"), nil)
	serviceBytes = prometheus.NewDesc("ipvsproxy_service_bytes_total",
		"Bytes through the Service port's virtual servers on this node, by direction.", append(serviceLabels, "direction"), nil)
	serviceStatsReadErrors = prometheus.NewDesc("ipvsproxy_service_stats_read_errors",
		"1 when the last read of the IPVS counters failed.", nil, nil)
)

// ServiceStats is a prometheus.Collector of per-Service traffic
// (connections, packets and bytes) from the kernel's IPVS counters, summed
// over the virtual servers of each Service port (cluster IP, node ports,
// external and load balancer IPs). The daemon registers it only with
// --metrics-per-service: one series per Service port and direction is a
// cardinality a large cluster must choose. It reads the counters at each
// scrape and never writes to the kernel.
type ServiceStats struct {
	names func() map[ipvs.VirtualServerKey]ipvsproxy.ServicePortName
	stats ipvs.StatsReader
}

// NewServiceStats returns a collector naming virtual servers with names (the
// proxier's VirtualServerNames) and reading counters from stats.
func NewServiceStats(names func() map[ipvs.VirtualServerKey]ipvsproxy.ServicePortName, stats ipvs.StatsReader) *ServiceStats {
	return &ServiceStats{names: names, stats: stats}
}

func (c *ServiceStats) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{serviceConnections, servicePackets, serviceBytes, serviceStatsReadErrors} {
		ch <- d
	}
}

func (c *ServiceStats) Collect(ch chan<- prometheus.Metric) {
	stats, err := c.stats.VirtualServerStats()
	if err != nil {
		klog.ErrorS(err, "Reading IPVS counters for per-Service metrics")
		ch <- prometheus.MustNewConstMetric(serviceStatsReadErrors, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(serviceStatsReadErrors, prometheus.GaugeValue, 0)
	sums := map[ipvsproxy.ServicePortName]ipvs.Stats{}
	for key, name := range c.names() {
		if s, ok := stats[key]; ok {
			sums[name] = sums[name].Add(s)
		}
	}
	for name, s := range sums {
		l := []string{name.Namespace, name.Name, name.Port, string(name.Protocol)}
		ch <- prometheus.MustNewConstMetric(serviceConnections, prometheus.CounterValue, float64(s.Connections), l...)
		ch <- prometheus.MustNewConstMetric(servicePackets, prometheus.CounterValue, float64(s.PacketsIn), append(l, "in")...)
		ch <- prometheus.MustNewConstMetric(servicePackets, prometheus.CounterValue, float64(s.PacketsOut), append(l, "out")...)
		ch <- prometheus.MustNewConstMetric(serviceBytes, prometheus.CounterValue, float64(s.BytesIn), append(l, "in")...)
		ch <- prometheus.MustNewConstMetric(serviceBytes, prometheus.CounterValue, float64(s.BytesOut), append(l, "out")...)
	}
}
