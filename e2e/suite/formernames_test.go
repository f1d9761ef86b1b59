//go:build e2e

package suite

// formerNames are the verdicts' names in 0.1.0-rc.1 (numbers, and hostile),
// each with the name it has now. A selection may still use them in the 0.1
// releases (each is printed with its name); 0.2.0 drops them with this file.
var formerNames = map[string]string{
	"1": "tutorial-clusterip", "2": "tutorial-nodeport", "3": "tutorial-nodeport-local",
	"4": "tutorial-loadbalancer", "5": "tutorial-loadbalancer-local", "6": "tutorial-proxy-mode",
	"7": "spread-over-endpoints", "8": "udp-endpoint-removed", "9": "restart-under-load",
	"10": "cleanup-leaves-nothing", "11": "local-policy-no-endpoints", "12": "external-ip-held-by-node",
	"13": "source-ranges-open", "14": "health-check-via-lb-ip", "15": "source-ranges-node-traffic",
	"16": "host-firewall", "17": "local-traffic-detection",
	"18": "internal-traffic-local", "18v6": "internal-traffic-local-ipv6",
	"19": "traffic-distribution", "19v6": "traffic-distribution-ipv6",
	"20": "exclude-cidrs", "21": "external-ip-guard", "22": "scheduler-flag-unknown",
	"23": "client-ip-affinity", "23v6": "client-ip-affinity-ipv6",
	"25": "port-conflict-older-wins", "26": "foreign-virtual-server-kept", "27": "failing-object-isolated",
	"30": "inspect", "31": "inspect-check", "32": "inspect-trace",
	"33": "inspect-trace-local-nodeport", "34": "inspect-trace-source-ranges",
	"35": "udp-stale-flow-after-restart", "36": "health-not-starved", "36v6": "health-not-starved-ipv6",
	"37": "udp-stale-flow-periodic", "38": "sctp", "38v6": "sctp-ipv6",
	"39a": "ipmode-proxy", "39av6": "ipmode-proxy-ipv6", "39b": "masquerade-all", "39bv6": "masquerade-all-ipv6",
	"40": "kubeadm-config-file", "41": "scheduler-annotation", "42": "kube-proxy-metrics",
	"43": "migrate-node-by-node", "44": "migrate-from-kube-proxy-ipvs", "44v6": "migrate-from-kube-proxy-ipvs-ipv6",
	"44rollback": "rollback-to-kube-proxy-ipvs",
	"44iptables": "migrate-from-kube-proxy-iptables", "44nftables": "migrate-from-kube-proxy-nftables",
	"44rbiptables": "rollback-to-kube-proxy-iptables", "44rbnftables": "rollback-to-kube-proxy-nftables",
	"45": "service-cidr-route", "46": "resync-shares", "47": "node-address-guard",
	"48": "ownership-record-rewritten", "49": "older-clusterrole",
	"50": "ipv6-dual-stack-clusterip", "51": "ipv6-prefer-dual-stack", "52": "ipv6-nodeport",
	"53": "ipv6-loadbalancer-local", "54": "ipv6-source-ranges", "55": "ipv6-external-ip",
	"56": "ipv6-udp-endpoint-removed", "57": "ipv6-inspect", "58": "ipv6-full-recheck",
	"60": "terminating-endpoint", "61": "service-deletion-drains",
	"62": "api-outage", "62v6": "api-outage-ipv6", "63": "second-service-cidr",
	"64": "servicelb-node-addresses", "65": "api-vip-claim-refused",
	"70": "upgrade-downgrade", "70v6": "upgrade-downgrade-ipv6",
	"hostile": "hostile-service",
}
