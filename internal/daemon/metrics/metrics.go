package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	v1 "k8s.io/api/core/v1"
)

const (
	kubeProxySubsystem = "kubeproxy"
	ourNamespace       = "ipvsproxy"
)

// Label values of KernelWriteFailuresTotal's "object" label: the kernel
// object kinds the proxier writes.
const (
	objectIPVS      = "ipvs"
	objectAddress   = "address"
	objectIPSet     = "ipset"
	objectIPTables  = "iptables"
	objectConntrack = "conntrack"
	objectSysctl    = "sysctl"
)

// Label values of NoLocalEndpoints's "traffic_policy" label, as kube-proxy
// sets them: internal for internalTrafficPolicy Local, external for
// externalTrafficPolicy Local.
const (
	trafficPolicyInternal = "internal"
	trafficPolicyExternal = "external"
)

// Metrics are the proxier's metrics. Fields are exported for the proxier to
// set directly; labels named ip_family take string(v1.IPv4Protocol) or
// string(v1.IPv6Protocol), as kube-proxy's do.
type Metrics struct {
	// Registry holds every metric below plus the Go runtime and process
	// collectors kube-proxy also exposes. serveStatus serves it.
	Registry *prometheus.Registry

	// kube-proxy's metrics (names, buckets and labels as in v1.36 and v1.37).

	// SyncProxyRulesLatency observes each sync's duration in seconds
	// (ip_family).
	SyncProxyRulesLatency *prometheus.HistogramVec
	// SyncFullProxyRulesLatency and SyncPartialProxyRulesLatency observe
	// each full and each partial sync's duration (ip_family).
	SyncFullProxyRulesLatency    *prometheus.HistogramVec
	SyncPartialProxyRulesLatency *prometheus.HistogramVec
	// ConntrackReconcilerSyncDuration observes how long deleting stale
	// conntrack flows took, per family, in each sync that deleted some;
	// ConntrackReconcilerDeletedEntriesTotal counts the flows (ip_family).
	ConntrackReconcilerSyncDuration        *prometheus.HistogramVec
	ConntrackReconcilerDeletedEntriesTotal *prometheus.CounterVec
	// BuildInfo is kubernetes_build_info, 1 with the version labels.
	BuildInfo *prometheus.GaugeVec
	// SyncProxyRulesLastTimestamp is the Unix time of the last successful
	// sync (ip_family).
	SyncProxyRulesLastTimestamp *prometheus.GaugeVec
	// SyncProxyRulesLastQueuedTimestamp is the Unix time a sync was last
	// queued (ip_family); far ahead of the last sync means a hung proxier.
	SyncProxyRulesLastQueuedTimestamp *prometheus.GaugeVec
	// NetworkProgrammingLatency observes, per changed EndpointSlice, the
	// seconds from its last-change-trigger-time to the sync that programmed
	// it (ip_family). See ObserveNetworkProgramming.
	NetworkProgrammingLatency *prometheus.HistogramVec
	// EndpointChangesPending is the number of EndpointSlice changes not yet
	// synced.
	EndpointChangesPending prometheus.Gauge
	// EndpointChangesTotal counts EndpointSlice changes seen.
	EndpointChangesTotal prometheus.Counter
	// ServiceChangesPending is the number of Service changes not yet synced.
	ServiceChangesPending prometheus.Gauge
	// ServiceChangesTotal counts Service changes seen.
	ServiceChangesTotal prometheus.Counter
	// NoLocalEndpoints is, after each sync, the number of Services with a
	// Local traffic policy and no local endpoint (traffic_policy, ip_family).
	// A gauge despite its _total name, as in kube-proxy.
	NoLocalEndpoints *prometheus.GaugeVec
	// IPTablesRestoreFailuresTotal counts failed iptables-restore runs
	// (ip_family); kube-proxy's IPVS mode exposes it too.
	IPTablesRestoreFailuresTotal *prometheus.CounterVec
	// ProxyHealthzTotal and ProxyLivezTotal count /healthz and /livez answers
	// by HTTP status (code); pass them to healthcheck.ProxyHealth.CountResponses.
	ProxyHealthzTotal *prometheus.CounterVec
	ProxyLivezTotal   *prometheus.CounterVec

	// Our own metrics.

	// KernelWriteFailuresTotal counts failed kernel writes by kind of object
	// (object: the Object* constants). Every value starts at 0 so alerts on
	// increase() see the first failure.
	KernelWriteFailuresTotal *prometheus.CounterVec
	// KernelObjectsFailing is, after each sync, the number of kernel
	// objects whose last write failed and that wait for a retry (object).
	KernelObjectsFailing *prometheus.GaugeVec
	// SchedulerFallback is 1 for the configured IPVS scheduler (scheduler)
	// when the kernel refused it and wrr is used instead, 0 otherwise. See
	// SetSchedulerFallback.
	SchedulerFallback *prometheus.GaugeVec
	// ConntrackEntriesDeletedTotal counts conntrack flows deleted because
	// their UDP endpoint went away or their Service got its first endpoint
	// (ip_family).
	ConntrackEntriesDeletedTotal *prometheus.CounterVec
	// RealServersDraining is the number of real servers at weight 0 waiting
	// for their connections to end before deletion.
	RealServersDraining prometheus.Gauge
	// DeletionsHeld is 1 while the Service default/kubernetes is absent
	// and no kernel object is deleted; HeldDeletions counts the objects
	// whose deletion waits. See SetDeletionsHeld.
	DeletionsHeld prometheus.Gauge
	HeldDeletions prometheus.Gauge
	// APIPermissionMissing is 1 while the API server answers 403 to a list
	// or watch of the daemon's (group, resource, verb), 0 once it serves it.
	APIPermissionMissing *prometheus.GaugeVec
	// SyncFullTotal and SyncPartialTotal count completed syncs by kind.
	SyncFullTotal    prometheus.Counter
	SyncPartialTotal prometheus.Counter
	// FullReadVirtualServersTotal counts the virtual servers whose real
	// servers a full sync read, by how (read): "table", all of them from
	// /proc/net/ip_vs in one pass, or "dump", one netlink dump each (no
	// table in the daemon's namespace, or what a large table's read left).
	FullReadVirtualServersTotal *prometheus.CounterVec
}

// How a full sync read a virtual server's real servers (the "read" label of
// ipvsproxy_full_read_virtual_servers_total).
const (
	ReadFromTable = "table"
	ReadDumped    = "dump"
)

// alpha marks help text the way Kubernetes' component-base does for ALPHA
// metrics, so /metrics reads the same as kube-proxy's.
func alpha(help string) string { return "[ALPHA] " + help }

// syncBuckets are kube-proxy's: 1ms doubling to about 16s.
var syncBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)

// networkProgrammingBuckets are kube-proxy's: a leading 0 (component-base's
// MergeBuckets starts with one), 0.25s and 0.5s, every second to 59s, every
// 5s to 115s, every 30s to 5min.
var networkProgrammingBuckets = mergeBuckets(
	prometheus.LinearBuckets(0.25, 0.25, 2),
	prometheus.LinearBuckets(1, 1, 59),
	prometheus.LinearBuckets(60, 5, 12),
	prometheus.LinearBuckets(120, 30, 7),
)

func mergeBuckets(parts ...[]float64) []float64 {
	merged := []float64{0}
	for _, p := range parts {
		merged = append(merged, p...)
	}
	return merged
}

// New returns the proxier's metrics registered in a new registry.
func New() *Metrics {
	ipFamily := []string{"ip_family"}
	m := &Metrics{
		Registry: prometheus.NewRegistry(),

		SyncProxyRulesLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: kubeProxySubsystem, Name: "sync_proxy_rules_duration_seconds",
			Help: alpha("SyncProxyRules latency in seconds"), Buckets: syncBuckets,
		}, ipFamily),
		SyncFullProxyRulesLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: kubeProxySubsystem, Name: "sync_full_proxy_rules_duration_seconds",
			Help: alpha("SyncProxyRules latency in seconds for full resyncs"), Buckets: syncBuckets,
		}, ipFamily),
		SyncPartialProxyRulesLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: kubeProxySubsystem, Name: "sync_partial_proxy_rules_duration_seconds",
			Help: alpha("SyncProxyRules latency in seconds for partial resyncs"), Buckets: syncBuckets,
		}, ipFamily),
		ConntrackReconcilerSyncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: kubeProxySubsystem, Name: "conntrack_reconciler_sync_duration_seconds",
			Help: alpha("ReconcileConntrackFlowsLatency latency in seconds"), Buckets: syncBuckets,
		}, ipFamily),
		ConntrackReconcilerDeletedEntriesTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: kubeProxySubsystem, Name: "conntrack_reconciler_deleted_entries_total",
			Help: alpha("Cumulative conntrack flows deleted by conntrack reconciler"),
		}, ipFamily),
		BuildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubernetes_build_info",
			Help: alpha("A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running."),
		}, []string{"major", "minor", "git_version", "git_commit", "git_tree_state", "build_date", "go_version", "compiler", "platform"}),
		SyncProxyRulesLastTimestamp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: kubeProxySubsystem, Name: "sync_proxy_rules_last_timestamp_seconds",
			Help: alpha("The last time proxy rules were successfully synced"),
		}, ipFamily),
		SyncProxyRulesLastQueuedTimestamp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: kubeProxySubsystem, Name: "sync_proxy_rules_last_queued_timestamp_seconds",
			Help: alpha("The last time a sync of proxy rules was queued"),
		}, ipFamily),
		NetworkProgrammingLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: kubeProxySubsystem, Name: "network_programming_duration_seconds",
			Help: alpha("In Cluster Network Programming Latency in seconds"), Buckets: networkProgrammingBuckets,
		}, ipFamily),
		EndpointChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: kubeProxySubsystem, Name: "sync_proxy_rules_endpoint_changes_pending",
			Help: alpha("Pending proxy rules Endpoint changes"),
		}),
		EndpointChangesTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: kubeProxySubsystem, Name: "sync_proxy_rules_endpoint_changes_total",
			Help: alpha("Cumulative proxy rules Endpoint changes"),
		}),
		ServiceChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: kubeProxySubsystem, Name: "sync_proxy_rules_service_changes_pending",
			Help: alpha("Pending proxy rules Service changes"),
		}),
		ServiceChangesTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: kubeProxySubsystem, Name: "sync_proxy_rules_service_changes_total",
			Help: alpha("Cumulative proxy rules Service changes"),
		}),
		NoLocalEndpoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: kubeProxySubsystem, Name: "sync_proxy_rules_no_local_endpoints_total",
			Help: alpha("Number of services with a Local traffic policy and no endpoints"),
		}, []string{"traffic_policy", "ip_family"}),
		IPTablesRestoreFailuresTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: kubeProxySubsystem, Name: "sync_proxy_rules_iptables_restore_failures_total",
			Help: alpha("Cumulative proxy iptables restore failures"),
		}, ipFamily),
		ProxyHealthzTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: kubeProxySubsystem, Name: "proxy_healthz_total",
			Help: alpha("Cumulative proxy healthz HTTP status"),
		}, []string{"code"}),
		ProxyLivezTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: kubeProxySubsystem, Name: "proxy_livez_total",
			Help: alpha("Cumulative proxy livez HTTP status"),
		}, []string{"code"}),

		KernelWriteFailuresTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ourNamespace, Name: "kernel_write_failures_total",
			Help: "Kernel writes that failed and will be retried on the next sync, by kind of object",
		}, []string{"object"}),
		KernelObjectsFailing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ourNamespace, Name: "kernel_objects_failing",
			Help: "Kernel objects whose last write failed, retried with backoff, by kind of object",
		}, []string{"object"}),
		SchedulerFallback: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ourNamespace, Name: "scheduler_fallback",
			Help: "1 when the kernel refused the configured IPVS scheduler (label) and wrr is used instead",
		}, []string{"scheduler"}),
		ConntrackEntriesDeletedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ourNamespace, Name: "conntrack_entries_deleted_total",
			Help: "Stale conntrack flows deleted: of UDP endpoints that went away, or of UDP Services that got their first endpoint",
		}, ipFamily),
		RealServersDraining: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ourNamespace, Name: "real_servers_draining",
			Help: "IPVS real servers at weight 0 waiting for their connections to end",
		}),
		DeletionsHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ourNamespace, Name: "deletions_held",
			Help: "1 while the Service default/kubernetes is absent from the Service list: nothing is deleted from the kernel until it returns",
		}),
		HeldDeletions: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ourNamespace, Name: "held_deletions",
			Help: "Kernel objects (virtual servers, addresses, set members) whose deletion waits for the Service default/kubernetes",
		}),
		APIPermissionMissing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ourNamespace, Name: "api_permission_missing",
			Help: "1 while the API server forbids a list or watch the daemon needs (group, resource, verb): a ClusterRole older than the daemon",
		}, []string{"group", "resource", "verb"}),
		SyncFullTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ourNamespace, Name: "sync_full_total",
			Help: "Completed full syncs (start-up, after a failure, periodic)",
		}),
		SyncPartialTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ourNamespace, Name: "sync_partial_total",
			Help: "Completed partial syncs (only what changed)",
		}),
		FullReadVirtualServersTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ourNamespace, Name: "full_read_virtual_servers_total",
			Help: "Virtual servers whose real servers a full sync read, by how: from /proc/net/ip_vs in one pass (table) or one netlink dump each (dump)",
		}, []string{"read"}),
	}

	m.Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.SyncProxyRulesLatency,
		m.SyncFullProxyRulesLatency,
		m.SyncPartialProxyRulesLatency,
		m.ConntrackReconcilerSyncDuration,
		m.ConntrackReconcilerDeletedEntriesTotal,
		m.BuildInfo,
		m.SyncProxyRulesLastTimestamp,
		m.SyncProxyRulesLastQueuedTimestamp,
		m.NetworkProgrammingLatency,
		m.EndpointChangesPending,
		m.EndpointChangesTotal,
		m.ServiceChangesPending,
		m.ServiceChangesTotal,
		m.NoLocalEndpoints,
		m.IPTablesRestoreFailuresTotal,
		m.ProxyHealthzTotal,
		m.ProxyLivezTotal,
		m.KernelWriteFailuresTotal,
		m.KernelObjectsFailing,
		m.SchedulerFallback,
		m.ConntrackEntriesDeletedTotal,
		m.RealServersDraining,
		m.DeletionsHeld,
		m.HeldDeletions,
		m.APIPermissionMissing,
		m.SyncFullTotal,
		m.SyncPartialTotal,
		m.FullReadVirtualServersTotal,
	)
	m.FullReadVirtualServersTotal.WithLabelValues(ReadFromTable)
	m.FullReadVirtualServersTotal.WithLabelValues(ReadDumped)
	for _, object := range []string{objectIPVS, objectAddress, objectIPSet, objectIPTables, objectConntrack, objectSysctl} {
		m.KernelWriteFailuresTotal.WithLabelValues(object)
		m.KernelObjectsFailing.WithLabelValues(object)
	}
	return m
}

// SetSchedulerFallback records the start-up scheduler probe: fellBack is true
// when the kernel refused configured and wrr replaced it.
func (m *Metrics) SetSchedulerFallback(configured string, fellBack bool) {
	value := 0.0
	if fellBack {
		value = 1
	}
	m.SchedulerFallback.WithLabelValues(configured).Set(value)
}

// SetNoLocalEndpoints records, after a sync, how many Services of family have
// a Local internal or external traffic policy and no local endpoint.
func (m *Metrics) SetNoLocalEndpoints(family v1.IPFamily, internal, external int) {
	m.NoLocalEndpoints.WithLabelValues(trafficPolicyInternal, string(family)).Set(float64(internal))
	m.NoLocalEndpoints.WithLabelValues(trafficPolicyExternal, string(family)).Set(float64(external))
}

// SetKernelObjectsFailing records, after a sync, how many objects of each
// kind are failing; kinds not in failing are 0.
func (m *Metrics) SetKernelObjectsFailing(failing map[string]int) {
	for _, object := range []string{objectIPVS, objectAddress, objectIPSet, objectIPTables, objectConntrack, objectSysctl} {
		m.KernelObjectsFailing.WithLabelValues(object).Set(float64(failing[object]))
	}
	for object, n := range failing {
		m.KernelObjectsFailing.WithLabelValues(object).Set(float64(n))
	}
}

// SetDeletionsHeld records whether deletions are held after a sync, and how
// many objects wait.
func (m *Metrics) SetDeletionsHeld(held bool, objects int) {
	value := 0.0
	if held {
		value = 1
	}
	m.DeletionsHeld.Set(value)
	m.HeldDeletions.Set(float64(objects))
}
