package owned

import (
	"strings"

	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
)

// The ipsets the proxier owns. Each family has its own copy; IPv6 names
// carry "6-" after "KUBE-". Sets that drive masquerade hold only entries of
// Cluster-policy traffic, so Local-policy traffic matches no rule at all.
const (
	SetClusterIP    = "KUBE-CLUSTER-IP"             // cluster IP,proto:port of every Service port
	SetExternalIP   = "KUBE-EXTERNAL-IP"            // external IPs of Cluster-policy ports: SNAT
	SetLoadBalancer = "KUBE-LOAD-BALANCER"          // LB ingress IPs of Cluster-policy ports: SNAT
	SetNodePortTCP  = "KUBE-NODE-PORT-TCP"          // Cluster-policy TCP node ports: SNAT
	SetNodePortUDP  = "KUBE-NODE-PORT-UDP"          // Cluster-policy UDP node ports: SNAT
	SetNodePortSCTP = "KUBE-NODE-PORT-SCTP-HASH"    // node IP,sctp:port of Cluster-policy SCTP node ports
	SetLoopBack     = "KUBE-LOOP-BACK"              // endpoint IP,proto:port,endpoint IP: hairpin SNAT
	SetIPVSServices = "KUBE-IPVS-SERVICES"          // every service address,proto:port with a virtual server (not node ports)
	SetIPVSIPs      = "KUBE-IPVS-IPS"               // every address bound on kube-ipvs0
	SetServiceCIDRs = "KUBE-SERVICE-CIDRS"          // Service CIDRs routed local on kube-ipvs0
	SetLBFirewall   = "KUBE-LOAD-BALANCER-FW"       // LB IP,proto:port that has loadBalancerSourceRanges
	SetLBSourceCIDR = "KUBE-LOAD-BALANCER-SRC-CIDR" // LB IP,proto:port,allowed source CIDR
	// LB IP,proto:port with source ranges that hold no node address: node
	// and hostNetwork processes may not use it (kubernetes#119656).
	SetLBNoNodeAccess = "KUBE-LOAD-BALANCER-NO-NODE"
	// External address,proto:port of a Local-policy Service with no endpoint
	// on this node: only in-cluster sources may use it (they get the cluster
	// endpoints, kubernetes#97081); other sources are dropped.
	SetLocalNoEndpoints = "KUBE-LOCAL-NO-ENDPOINTS"
	SetNodePorts        = "KUBE-IPVS-NODE-PORTS"        // node IP,proto:port of every NodePort virtual server
	SetHealthCheckPorts = "KUBE-HEALTH-CHECK-NODE-PORT" // health check node ports (any address)
	SetOwned            = "KUBE-IPVS-OWNED"             // IP,proto:port of every virtual server the proxier created (ownership.go)
)

// setSpec is one owned set, with its purpose as the comment.
type setSpec struct {
	name    string
	typ     ipset.Type
	comment string
}

var setSpecs = []setSpec{
	{SetClusterIP, ipset.HashIPPort, "cluster IP + port, masqueraded from outside the cluster CIDR"},
	{SetExternalIP, ipset.HashIPPort, "external IP + port of Cluster-policy Services, masqueraded"},
	{SetLoadBalancer, ipset.HashIPPort, "load balancer IP + port of Cluster-policy Services, masqueraded"},
	{SetNodePortTCP, ipset.BitmapPort, "TCP node ports of Cluster-policy Services, masqueraded"},
	{SetNodePortUDP, ipset.BitmapPort, "UDP node ports of Cluster-policy Services, masqueraded"},
	{SetNodePortSCTP, ipset.HashIPPort, "SCTP node IP + port of Cluster-policy Services, masqueraded"},
	{SetLoopBack, ipset.HashIPPortIP, "endpoint reaching itself through its Service (hairpin), masqueraded"},
	{SetIPVSServices, ipset.HashIPPort, "address + port of every virtual server but node ports"},
	{SetIPVSIPs, ipset.HashIP, "addresses bound on kube-ipvs0"},
	{SetServiceCIDRs, ipset.HashNet, "Service CIDRs made local by one route on kube-ipvs0"},
	{SetLBFirewall, ipset.HashIPPort, "load balancer IP + port with loadBalancerSourceRanges"},
	{SetLBSourceCIDR, ipset.HashIPPortNet, "load balancer IP + port + allowed source range"},
	{SetLBNoNodeAccess, ipset.HashIPPort, "load balancer IP + port whose source ranges hold no node address"},
	{SetLocalNoEndpoints, ipset.HashIPPort, "Local-policy address + port without local endpoints: in-cluster sources only"},
	{SetNodePorts, ipset.HashIPPort, "node IP + port of every NodePort virtual server"},
	{SetHealthCheckPorts, ipset.BitmapPort, "health check node ports"},
	// The ownership record, not a desired state: no rule matches it.
	{SetOwned, ipset.HashIPPort, "virtual servers ipvsproxy created"},
}

// SetName is the kernel name (at most 31 bytes: IPSET_MAXNAMELEN) of an owned set for a family.
func SetName(base string, family v1.IPFamily) string {
	if family == v1.IPv6Protocol {
		return "KUBE-6-" + base[len("KUBE-"):]
	}
	return base
}

// BaseName is the IPv4 name of an owned set of either family.
func BaseName(name string) string {
	if strings.HasPrefix(name, "KUBE-6-") {
		return "KUBE-" + name[len("KUBE-6-"):]
	}
	return name
}

// Sets lists every set the proxier owns for the families, fully named,
// hash sets sized to hold maxElem entries.
func Sets(families []v1.IPFamily, maxElem uint32) []ipset.Set {
	var out []ipset.Set
	for _, f := range families {
		fam := ipset.IPv4
		if f == v1.IPv6Protocol {
			fam = ipset.IPv6
		}
		for _, s := range setSpecs {
			out = append(out, ipset.Set{Name: SetName(s.name, f), Type: s.typ, Family: fam, Comment: s.comment, MaxElem: maxElem})
		}
	}
	return out
}

// TempSetSuffix names the temporary twin of an owned set while the writer
// replaces it; every owned name plus it fits IPSET_MAXNAMELEN (31). A twin
// left by a replace cut short is as much the proxier's as the set.
const TempSetSuffix = "-T"

// TempSetName is the temporary twin's name of the owned set name.
func TempSetName(name string) string { return name + TempSetSuffix }

// SetType finds the type of an owned set by its full name.
func SetType(name string) ipset.Type {
	for _, s := range setSpecs {
		if name == s.name || name == SetName(s.name, v1.IPv6Protocol) {
			return s.typ
		}
	}
	return ""
}
