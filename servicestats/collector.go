package servicestats

import (
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

var (
	labels      = []string{"namespace", "service", "port", "protocol"}
	connections = prometheus.NewDesc("ipvsproxy_service_connections_total",
		"Connections IPVS scheduled to the Service port's endpoints on this node, over its virtual servers (resets when a virtual server is re-created).", labels, nil)
	packets = prometheus.NewDesc("ipvsproxy_service_packets_total",
		"Packets through the Service port's virtual servers on this node, by direction (in: from clients, out: replies).", append(labels, "direction"), nil)
	bytes = prometheus.NewDesc("ipvsproxy_service_bytes_total",
		"Bytes through the Service port's virtual servers on this node, by direction.", append(labels, "direction"), nil)
	scrapeErrors = prometheus.NewDesc("ipvsproxy_service_stats_read_errors",
		"1 when the last read of the IPVS counters failed.", nil, nil)
)

// Collector is a prometheus.Collector over the IPVS counters.
type Collector struct {
	names func() map[ipvs.VirtualServerKey]ipvsproxy.ServicePortName
	stats ipvs.StatsReader
}

// New returns a collector naming virtual servers with names (the
// proxier's VirtualServerNames) and reading counters from stats.
func New(names func() map[ipvs.VirtualServerKey]ipvsproxy.ServicePortName, stats ipvs.StatsReader) *Collector {
	return &Collector{names: names, stats: stats}
}

func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{connections, packets, bytes, scrapeErrors} {
		ch <- d
	}
}

func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	stats, err := c.stats.VirtualServerStats()
	if err != nil {
		klog.ErrorS(err, "Reading IPVS counters for per-Service metrics")
		ch <- prometheus.MustNewConstMetric(scrapeErrors, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrors, prometheus.GaugeValue, 0)
	sums := map[ipvsproxy.ServicePortName]ipvs.Stats{}
	for key, name := range c.names() {
		if s, ok := stats[key]; ok {
			sums[name] = sums[name].Add(s)
		}
	}
	for name, s := range sums {
		l := []string{name.Namespace, name.Name, name.Port, string(name.Protocol)}
		ch <- prometheus.MustNewConstMetric(connections, prometheus.CounterValue, float64(s.Connections), l...)
		ch <- prometheus.MustNewConstMetric(packets, prometheus.CounterValue, float64(s.PacketsIn), append(l, "in")...)
		ch <- prometheus.MustNewConstMetric(packets, prometheus.CounterValue, float64(s.PacketsOut), append(l, "out")...)
		ch <- prometheus.MustNewConstMetric(bytes, prometheus.CounterValue, float64(s.BytesIn), append(l, "in")...)
		ch <- prometheus.MustNewConstMetric(bytes, prometheus.CounterValue, float64(s.BytesOut), append(l, "out")...)
	}
}
