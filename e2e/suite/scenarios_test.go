//go:build e2e

package suite

// A scenario is one t.Run: it writes its own Services and prints one verdict
// line per step, each named by the behaviour it checks (tutorial-nodeport has
// the steps tutorial-nodeport and tutorial-nodeport-local, on one Service).
type scenario struct {
	name     string   // what IPVSPROXY_E2E_SCENARIOS names; also its first verdict
	verdicts []string // every verdict it prints, name first; an IPv6 half is NAME-ipv6 (DualStep)
	run      func(s *S)
}

// scenarios in their default order. restart-under-load and
// cleanup-leaves-nothing end it: they stop the proxiers. docs/testing.md
// lists every scenario with what it checks.
var scenarios = []scenario{
	{"tutorial-clusterip", []string{"tutorial-clusterip"}, scenarioClusterIP},
	{"tutorial-nodeport", []string{"tutorial-nodeport", "tutorial-nodeport-local"}, scenarioNodePort},
	{"tutorial-loadbalancer", []string{"tutorial-loadbalancer", "tutorial-loadbalancer-local"}, scenarioLoadBalancer},
	{"tutorial-proxy-mode", []string{"tutorial-proxy-mode"}, scenarioProxyMode},
	{"spread-over-endpoints", []string{"spread-over-endpoints"}, scenarioSpread},
	{"udp-endpoint-removed", []string{"udp-endpoint-removed"}, scenarioUDP},
	{"local-policy-no-endpoints", []string{"local-policy-no-endpoints"}, scenarioLocalNoEndpoints},
	{"external-ip-held-by-node", []string{"external-ip-held-by-node"}, scenarioNodeAddress},
	{"source-ranges-open", []string{"source-ranges-open"}, scenarioSourceRangesAll},
	{"health-check-via-lb-ip", []string{"health-check-via-lb-ip"}, scenarioHealthCheckLBIP},
	{"source-ranges-node-traffic", []string{"source-ranges-node-traffic"}, scenarioNodeSourceRanges},
	{"host-firewall", []string{"host-firewall"}, scenarioHostFirewall},
	{"local-traffic-detection", []string{"local-traffic-detection"}, scenarioLocalDetect},
	{"internal-traffic-local", []string{"internal-traffic-local", "internal-traffic-local-ipv6"}, scenarioInternalTrafficLocal},
	{"traffic-distribution", []string{"traffic-distribution", "traffic-distribution-ipv6"}, scenarioTrafficDistribution},
	{"exclude-cidrs", []string{"exclude-cidrs"}, scenarioExcludeCIDRs},
	{"external-ip-guard", []string{"external-ip-guard"}, scenarioExternalIPGuard},
	{"scheduler-flag-unknown", []string{"scheduler-flag-unknown"}, scenarioSchedulerFlag},
	{"client-ip-affinity", []string{"client-ip-affinity", "client-ip-affinity-ipv6"}, scenarioAffinityTimeout},
	{"port-conflict-older-wins", []string{"port-conflict-older-wins"}, scenarioConflictLoser},
	{"foreign-virtual-server-kept", []string{"foreign-virtual-server-kept"}, scenarioForeignVirtualServer},
	{"failing-object-isolated", []string{"failing-object-isolated"}, scenarioFailingObject},
	{"inspect", []string{"inspect", "inspect-check", "inspect-trace"}, scenarioInspect},
	{"inspect-trace-local-nodeport", []string{"inspect-trace-local-nodeport"}, scenarioInspectLocalNodePort},
	{"inspect-trace-source-ranges", []string{"inspect-trace-source-ranges"}, scenarioInspectSourceRanges},
	{"udp-stale-flow-after-restart", []string{"udp-stale-flow-after-restart"}, scenarioConntrackReconcile},
	{"health-not-starved", []string{"health-not-starved", "health-not-starved-ipv6"}, scenarioHealthStarvation},
	{"udp-stale-flow-periodic", []string{"udp-stale-flow-periodic"}, scenarioConntrackPeriodic},
	{"sctp", []string{"sctp", "sctp-ipv6"}, scenarioSCTP},
	{"ipmode-proxy", []string{"ipmode-proxy", "ipmode-proxy-ipv6"}, scenarioIPModeProxy},
	{"masquerade-all", []string{"masquerade-all", "masquerade-all-ipv6"}, scenarioMasqueradeAll},
	{"kubeadm-config-file", []string{"kubeadm-config-file"}, scenarioConfigFile},
	{"scheduler-annotation", []string{"scheduler-annotation"}, scenarioSchedulerAnnotation},
	{"kube-proxy-metrics", []string{"kube-proxy-metrics"}, scenarioKubeProxyMetrics},
	{"migrate-node-by-node", []string{"migrate-node-by-node"}, scenarioMigrate},
	{"migrate-from-kube-proxy-ipvs", []string{"migrate-from-kube-proxy-ipvs", "migrate-from-kube-proxy-ipvs-ipv6"}, scenarioMigrateKubeProxy},
	{"service-cidr-route", []string{"service-cidr-route"}, scenarioServiceCIDRRoute},
	{"resync-shares", []string{"resync-shares"}, scenarioResyncShares},
	{"node-address-guard", []string{"node-address-guard"}, scenarioNodeGuard},
	{"ownership-record-rewritten", []string{"ownership-record-rewritten"}, scenarioOwnershipRecord},
	{"older-clusterrole", []string{"older-clusterrole"}, scenarioOlderClusterRole},
	{"ipv6-dual-stack-clusterip", []string{"ipv6-dual-stack-clusterip"}, scenarioDualStackClusterIP},
	{"ipv6-prefer-dual-stack", []string{"ipv6-prefer-dual-stack"}, scenarioPreferDualStack},
	{"ipv6-nodeport", []string{"ipv6-nodeport"}, scenarioIPv6NodePort},
	{"ipv6-loadbalancer-local", []string{"ipv6-loadbalancer-local"}, scenarioIPv6LoadBalancer},
	{"ipv6-source-ranges", []string{"ipv6-source-ranges"}, scenarioIPv6SourceRanges},
	{"ipv6-external-ip", []string{"ipv6-external-ip"}, scenarioIPv6ExternalIP},
	{"ipv6-udp-endpoint-removed", []string{"ipv6-udp-endpoint-removed"}, scenarioIPv6UDP},
	{"ipv6-inspect", []string{"ipv6-inspect"}, scenarioIPv6Inspect},
	{"ipv6-full-recheck", []string{"ipv6-full-recheck"}, scenarioIPv6TableRead},
	{"terminating-endpoint", []string{"terminating-endpoint"}, scenarioTerminatingEndpoint},
	{"service-deletion-drains", []string{"service-deletion-drains"}, scenarioServiceDeletionDrains},
	{"api-outage", []string{"api-outage", "api-outage-ipv6"}, scenarioAPIOutage},
	{"second-service-cidr", []string{"second-service-cidr"}, scenarioSecondServiceCIDR},
	{"servicelb-node-addresses", []string{"servicelb-node-addresses"}, scenarioServiceLBNodeAddresses},
	{"published-node-addresses", []string{"published-node-addresses"}, scenarioPublishedNodeAddresses},
	{"api-vip-claim-refused", []string{"api-vip-claim-refused"}, scenarioAPIVIPClaim},
	{"upgrade-downgrade", []string{"upgrade-downgrade", "upgrade-downgrade-ipv6"}, scenarioUpgradeDowngrade},
	{"hostile-service", []string{"hostile-service"}, scenarioHostileService},
	{"restart-under-load", []string{"restart-under-load"}, scenarioRestart},
	{"cleanup-leaves-nothing", []string{"cleanup-leaves-nothing"}, scenarioCleanup},
}

// byName are the scenarios left out of the default order: a selection runs
// them when it names them (`make e2e-migrate` names the migrations).
var byName = []scenario{
	{"rollback-to-kube-proxy-ipvs", []string{"rollback-to-kube-proxy-ipvs"}, scenarioRollbackKubeProxyIPVS},
	{"migrate-from-kube-proxy-iptables", []string{"migrate-from-kube-proxy-iptables"}, scenarioMigrateKubeProxyMode("iptables")},
	{"migrate-from-kube-proxy-nftables", []string{"migrate-from-kube-proxy-nftables"}, scenarioMigrateKubeProxyMode("nftables")},
	{"rollback-to-kube-proxy-iptables", []string{"rollback-to-kube-proxy-iptables"}, scenarioRollbackKubeProxyMode("iptables")},
	{"rollback-to-kube-proxy-nftables", []string{"rollback-to-kube-proxy-nftables"}, scenarioRollbackKubeProxyMode("nftables")},
}
