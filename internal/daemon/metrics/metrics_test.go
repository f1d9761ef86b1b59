package metrics

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
)

// families gathers m's registry, keeping only our and kube-proxy's metrics.
func families(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	gathered, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range gathered {
		if strings.HasPrefix(f.GetName(), "kubeproxy_") || strings.HasPrefix(f.GetName(), "ipvsproxy_") {
			out[f.GetName()] = f
		}
	}
	return out
}

// describe renders a family as "name type [labels]" from its first sample.
func describe(f *dto.MetricFamily) string {
	var labels []string
	if len(f.Metric) > 0 {
		for _, l := range f.Metric[0].Label {
			labels = append(labels, l.GetName())
		}
	}
	sort.Strings(labels)
	return fmt.Sprintf("%s %s %v", f.GetName(), f.GetType(), labels)
}

func TestMetricsHaveKubeProxyNamesTypesAndLabels(t *testing.T) {
	m := New()
	// Vectors only appear once a label set is used.
	m.SyncProxyRulesLatency.WithLabelValues(string(v1.IPv4Protocol)).Observe(0.01)
	m.SyncProxyRulesLastTimestamp.WithLabelValues(string(v1.IPv4Protocol)).SetToCurrentTime()
	m.SyncProxyRulesLastQueuedTimestamp.WithLabelValues(string(v1.IPv4Protocol)).SetToCurrentTime()
	m.ObserveNetworkProgramming(v1.IPv6Protocol, []time.Time{time.Unix(100, 0)}, time.Unix(101, 0))
	m.SetNoLocalEndpoints(v1.IPv4Protocol, 1, 2)
	m.IPTablesRestoreFailuresTotal.WithLabelValues(string(v1.IPv4Protocol)).Inc()
	m.ProxyHealthzTotal.WithLabelValues("200").Inc()
	m.ProxyLivezTotal.WithLabelValues("503").Inc()
	m.SetSchedulerFallback("twos", true)
	m.ConntrackEntriesDeletedTotal.WithLabelValues(string(v1.IPv4Protocol)).Add(3)
	m.APIPermissionMissing.WithLabelValues("networking.k8s.io", "servicecidrs", "list").Set(1)

	var got []string
	for _, f := range families(t, m) {
		got = append(got, describe(f))
	}
	sort.Strings(got)
	want := []string{
		"ipvsproxy_api_permission_missing GAUGE [group resource verb]",
		"ipvsproxy_conntrack_entries_deleted_total COUNTER [ip_family]",
		"ipvsproxy_deletions_held GAUGE []",
		"ipvsproxy_full_read_virtual_servers_total COUNTER [read]",
		"ipvsproxy_held_deletions GAUGE []",
		"ipvsproxy_kernel_objects_failing GAUGE [object]",
		"ipvsproxy_kernel_write_failures_total COUNTER [object]",
		"ipvsproxy_real_servers_draining GAUGE []",
		"ipvsproxy_scheduler_fallback GAUGE [scheduler]",
		"ipvsproxy_sync_full_total COUNTER []",
		"ipvsproxy_sync_partial_total COUNTER []",
		"kubeproxy_network_programming_duration_seconds HISTOGRAM [ip_family]",
		"kubeproxy_proxy_healthz_total COUNTER [code]",
		"kubeproxy_proxy_livez_total COUNTER [code]",
		"kubeproxy_sync_proxy_rules_duration_seconds HISTOGRAM [ip_family]",
		"kubeproxy_sync_proxy_rules_endpoint_changes_pending GAUGE []",
		"kubeproxy_sync_proxy_rules_endpoint_changes_total COUNTER []",
		"kubeproxy_sync_proxy_rules_iptables_restore_failures_total COUNTER [ip_family]",
		"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds GAUGE [ip_family]",
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds GAUGE [ip_family]",
		"kubeproxy_sync_proxy_rules_no_local_endpoints_total GAUGE [ip_family traffic_policy]",
		"kubeproxy_sync_proxy_rules_service_changes_pending GAUGE []",
		"kubeproxy_sync_proxy_rules_service_changes_total COUNTER []",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("metrics:\n%s\n\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestKernelWriteFailuresStartAtZeroForEveryObject(t *testing.T) {
	m := New()
	m.KernelWriteFailuresTotal.WithLabelValues(objectIPSet).Inc()
	got := map[string]float64{}
	for _, sample := range families(t, m)["ipvsproxy_kernel_write_failures_total"].Metric {
		got[sample.Label[0].GetValue()] = sample.GetCounter().GetValue()
	}
	want := map[string]float64{"ipvs": 0, "address": 0, "ipset": 1, "iptables": 0, "conntrack": 0, "sysctl": 0}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("kernel write failures = %v, want %v", got, want)
	}
}

func TestBucketsAreKubeProxys(t *testing.T) {
	// kube-proxy: ExponentialBuckets(0.001, 2, 15).
	if len(syncBuckets) != 15 || syncBuckets[0] != 0.001 || syncBuckets[14] != 16.384 {
		t.Errorf("sync buckets = %v", syncBuckets)
	}
	// kube-proxy: MergeBuckets (leading 0) of 0.25, 0.5; 1..59; 60..115 by 5;
	// 120..300 by 30.
	b := networkProgrammingBuckets
	if len(b) != 1+2+59+12+7 {
		t.Fatalf("network programming buckets: %d, want 81: %v", len(b), b)
	}
	for i, want := range map[int]float64{0: 0, 1: 0.25, 2: 0.5, 3: 1, 61: 59, 62: 60, 73: 115, 74: 120, 80: 300} {
		if b[i] != want {
			t.Errorf("bucket %d = %v, want %v", i, b[i], want)
		}
	}
}

func TestSchedulerFallbackAndNoLocalEndpoints(t *testing.T) {
	m := New()
	m.SetSchedulerFallback("twos", false)
	m.SetNoLocalEndpoints(v1.IPv6Protocol, 4, 0)
	f := families(t, m)
	if v := f["ipvsproxy_scheduler_fallback"].Metric[0].GetGauge().GetValue(); v != 0 {
		t.Errorf("scheduler fallback = %v, want 0 when the scheduler was accepted", v)
	}
	m.SetSchedulerFallback("twos", true)
	if v := families(t, m)["ipvsproxy_scheduler_fallback"].Metric[0].GetGauge().GetValue(); v != 1 {
		t.Errorf("scheduler fallback = %v, want 1 after a fallback", v)
	}
	got := map[string]float64{}
	for _, s := range f["kubeproxy_sync_proxy_rules_no_local_endpoints_total"].Metric {
		labels := map[string]string{}
		for _, l := range s.Label {
			labels[l.GetName()] = l.GetValue()
		}
		got[labels["traffic_policy"]+"/"+labels["ip_family"]] = s.GetGauge().GetValue()
	}
	if want := map[string]float64{"internal/IPv6": 4, "external/IPv6": 0}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("no local endpoints = %v, want %v", got, want)
	}
}

func TestObserveNetworkProgramming(t *testing.T) {
	m := New()
	synced := time.Date(2026, 11, 29, 22, 0, 10, 0, time.UTC)
	m.ObserveNetworkProgramming(v1.IPv4Protocol, []time.Time{
		synced.Add(-1500 * time.Millisecond), // 1.5s: in the le=2 bucket
		{},                                   // no trigger time: skipped
		synced.Add(-70 * time.Second),        // 70s: in the le=70 bucket
	}, synced)
	h := families(t, m)["kubeproxy_network_programming_duration_seconds"].Metric[0].GetHistogram()
	if h.GetSampleCount() != 2 || h.GetSampleSum() != 71.5 {
		t.Errorf("count %d sum %v, want 2 and 71.5", h.GetSampleCount(), h.GetSampleSum())
	}
	cumulative := map[float64]uint64{}
	for _, b := range h.Bucket {
		cumulative[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	for bound, want := range map[float64]uint64{1: 0, 2: 1, 65: 1, 70: 2} {
		if cumulative[bound] != want {
			t.Errorf("le=%v: %d, want %d", bound, cumulative[bound], want)
		}
	}
}
