package ipvsproxy

import (
	"strings"

	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
)

// The ipsets the proxier owns. Each family has its own copy; IPv6 names
// carry "6-" after "KUBE-". Sets that drive masquerade hold only entries of
// Cluster-policy traffic, so Local-policy traffic matches no rule at all.
const (
	setClusterIP    = "KUBE-CLUSTER-IP"             // cluster IP,proto:port of every Service port
	setExternalIP   = "KUBE-EXTERNAL-IP"            // external IPs of Cluster-policy ports: SNAT
	setLoadBalancer = "KUBE-LOAD-BALANCER"          // LB ingress IPs of Cluster-policy ports: SNAT
	setNodePortTCP  = "KUBE-NODE-PORT-TCP"          // Cluster-policy TCP node ports: SNAT
	setNodePortUDP  = "KUBE-NODE-PORT-UDP"          // Cluster-policy UDP node ports: SNAT
	setNodePortSCTP = "KUBE-NODE-PORT-SCTP-HASH"    // node IP,sctp:port of Cluster-policy SCTP node ports
	setLoopBack     = "KUBE-LOOP-BACK"              // endpoint IP,proto:port,endpoint IP: hairpin SNAT
	setIPVSServices = "KUBE-IPVS-SERVICES"          // every service address,proto:port with a virtual server (not node ports)
	setIPVSIPs      = "KUBE-IPVS-IPS"               // every address bound on kube-ipvs0
	setLBFirewall   = "KUBE-LOAD-BALANCER-FW"       // LB IP,proto:port that has loadBalancerSourceRanges
	setLBSourceCIDR = "KUBE-LOAD-BALANCER-SRC-CIDR" // LB IP,proto:port,allowed source CIDR
	// LB IP,proto:port with source ranges that hold no node address: node
	// and hostNetwork processes may not use it (kubernetes#119656).
	setLBNoNodeAccess = "KUBE-LOAD-BALANCER-NO-NODE"
	// External address,proto:port of a Local-policy Service with no endpoint
	// on this node: only in-cluster sources may use it (they get the cluster
	// endpoints, kubernetes#97081); other sources are dropped.
	setLocalNoEndpoints = "KUBE-LOCAL-NO-ENDPOINTS"
	setNodePorts        = "KUBE-IPVS-NODE-PORTS"        // node IP,proto:port of every NodePort virtual server
	setHealthCheckPorts = "KUBE-HEALTH-CHECK-NODE-PORT" // health check node ports (any address)
	setOwned            = "KUBE-IPVS-OWNED"             // IP,proto:port of every virtual server the proxier created (ownership.go)
)

// setSpec is one owned set, with its purpose as the comment.
type setSpec struct {
	name    string
	typ     ipset.Type
	comment string
}

var setSpecs = []setSpec{
	{setClusterIP, ipset.HashIPPort, "cluster IP + port, masqueraded from outside the cluster CIDR"},
	{setExternalIP, ipset.HashIPPort, "external IP + port of Cluster-policy Services, masqueraded"},
	{setLoadBalancer, ipset.HashIPPort, "load balancer IP + port of Cluster-policy Services, masqueraded"},
	{setNodePortTCP, ipset.BitmapPort, "TCP node ports of Cluster-policy Services, masqueraded"},
	{setNodePortUDP, ipset.BitmapPort, "UDP node ports of Cluster-policy Services, masqueraded"},
	{setNodePortSCTP, ipset.HashIPPort, "SCTP node IP + port of Cluster-policy Services, masqueraded"},
	{setLoopBack, ipset.HashIPPortIP, "endpoint reaching itself through its Service (hairpin), masqueraded"},
	{setIPVSServices, ipset.HashIPPort, "address + port of every virtual server but node ports"},
	{setIPVSIPs, ipset.HashIP, "addresses bound on kube-ipvs0"},
	{setLBFirewall, ipset.HashIPPort, "load balancer IP + port with loadBalancerSourceRanges"},
	{setLBSourceCIDR, ipset.HashIPPortNet, "load balancer IP + port + allowed source range"},
	{setLBNoNodeAccess, ipset.HashIPPort, "load balancer IP + port whose source ranges hold no node address"},
	{setLocalNoEndpoints, ipset.HashIPPort, "Local-policy address + port without local endpoints: in-cluster sources only"},
	{setNodePorts, ipset.HashIPPort, "node IP + port of every NodePort virtual server"},
	{setHealthCheckPorts, ipset.BitmapPort, "health check node ports"},
	// The ownership record, not a desired state: no rule matches it.
	{setOwned, ipset.HashIPPort, "virtual servers ipvsproxy created"},
}

// setName is the kernel name (at most 31 bytes: IPSET_MAXNAMELEN) of an owned set for a family.
func setName(base string, family v1.IPFamily) string {
	if family == v1.IPv6Protocol {
		return "KUBE-6-" + base[len("KUBE-"):]
	}
	return base
}

// baseName is the IPv4 name of an owned set of either family.
func baseName(name string) string {
	if strings.HasPrefix(name, "KUBE-6-") {
		return "KUBE-" + name[len("KUBE-6-"):]
	}
	return name
}

// ownedSets lists every set the proxier owns for the families, fully named,
// hash sets sized to hold maxElem entries.
func ownedSets(families []v1.IPFamily, maxElem uint32) []ipset.Set {
	var out []ipset.Set
	for _, f := range families {
		fam := ipset.IPv4
		if f == v1.IPv6Protocol {
			fam = ipset.IPv6
		}
		for _, s := range setSpecs {
			out = append(out, ipset.Set{Name: setName(s.name, f), Type: s.typ, Family: fam, Comment: s.comment, MaxElem: maxElem})
		}
	}
	return out
}

// SetEntry is one member the desired state wants in one set.
type SetEntry struct {
	Set   string
	Entry ipset.Entry
}

// key is a comparable identity of the entry within its set.
func (e SetEntry) key() setEntryKey {
	return setEntryKey{set: e.Set, entry: e.Entry}
}

type setEntryKey struct {
	set   string
	entry ipset.Entry
}
