package ipvsproxy

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
)

// Limits bound what one Service, and one namespace, may take of every
// node: of each owned set's maxelem, of the real servers the node programs,
// and of its memory. A Service beyond a per-Service cap is refused whole
// (ServiceTooLarge) before anything of it is written, whatever else runs; a
// namespace beyond its share is refused nothing while there is room, but
// when a set or the real servers are full its Services yield to those of
// namespaces within theirs (admission.go). So no Service, and no namespace,
// can take a set or the node's real servers from all the others. kube-system
// has no share: its Services come first.
type Limits struct {
	// MaxSetEntriesPerService is how many members one Service may have in
	// any one owned set (--ipset-max-elements-per-service), its ownership
	// records included: one per virtual server.
	MaxSetEntriesPerService int
	// SetEntriesPerNamespace is a namespace's share of each owned set
	// (--ipset-max-elements-per-namespace).
	SetEntriesPerNamespace int
	// MaxRealServers is how many real servers this node programs at most
	// (--ipvs-max-real-servers): what it keeps of them grows with the count.
	MaxRealServers int
	// MaxRealServersPerService caps one Service's real servers, and the
	// endpoint ports (endpoints times ports) its EndpointSlices list
	// (--ipvs-max-real-servers-per-service).
	MaxRealServersPerService int
	// RealServersPerNamespace is a namespace's share of MaxRealServers
	// (--ipvs-max-real-servers-per-namespace).
	RealServersPerNamespace int
}

// defaultLimits: a Service may take a quarter of a default set and a
// namespace half before it yields; 100,000 real servers a Service (5,000
// endpoints on 5 ports with a node port on 3 addresses is 60,000), a
// million a node (50,000 Services of 10 endpoints with a node port in four
// are 625,000), a quarter of them a namespace before it yields.
func defaultLimits() Limits {
	return Limits{
		MaxSetEntriesPerService:  ipset.DefaultMaxElem / 4,
		SetEntriesPerNamespace:   ipset.DefaultMaxElem / 2,
		MaxRealServers:           1_000_000,
		MaxRealServersPerService: 100_000,
		RealServersPerNamespace:  250_000,
	}
}

func (l Limits) validate() []error {
	var errs []error
	for _, c := range []struct {
		flag  string
		value int
	}{
		{"--ipset-max-elements-per-service", l.MaxSetEntriesPerService},
		{"--ipset-max-elements-per-namespace", l.SetEntriesPerNamespace},
		{"--ipvs-max-real-servers", l.MaxRealServers},
		{"--ipvs-max-real-servers-per-service", l.MaxRealServersPerService},
		{"--ipvs-max-real-servers-per-namespace", l.RealServersPerNamespace},
	} {
		if c.value < 1 {
			errs = append(errs, fmt.Errorf("%s=%d must be at least 1", c.flag, c.value))
		}
	}
	if l.MaxRealServersPerService > l.MaxRealServers {
		errs = append(errs, errors.New("--ipvs-max-real-servers-per-service must not exceed --ipvs-max-real-servers"))
	}
	return errs
}

// tooLarge says why the Service cannot be built within the per-Service caps,
// judged from its size before anything is built, or "": a Service of 10,000
// ports and 1,000 EndpointSlices would otherwise make its endpoints, virtual
// and real servers on every node first. Both counts bound what the build
// would make from above.
func (b *builder) tooLarge(ports []v1.ServicePort, endpointSlices []*EndpointSlice) string {
	limits := b.cfg.Limits
	// Every endpoint of a slice is kept once per port of the slice
	// (EndpointsByPort), and each is a real server of at least one virtual
	// server.
	pairs := 0
	for _, s := range endpointSlices {
		pairs += len(s.Ports) * len(s.Endpoints)
		if pairs > limits.MaxRealServersPerService {
			return fmt.Sprintf("its EndpointSlices list more than %d endpoint ports (endpoints times ports), the most a Service may have (--ipvs-max-real-servers-per-service); the Service is not programmed", limits.MaxRealServersPerService)
		}
	}
	// A virtual server per port and address, each with a member in the
	// ownership record.
	addresses := len(b.svc.Spec.ClusterIPs) + len(b.svc.Spec.ExternalIPs) + len(b.svc.Status.LoadBalancer.Ingress)
	nodeAddresses := 0
	for _, f := range b.cfg.Families {
		nodeAddresses += len(nodePortAddresses(b.node, b.cfg, f))
	}
	virtualServers := 0
	for _, p := range ports {
		virtualServers += addresses
		if p.NodePort != 0 {
			virtualServers += nodeAddresses
		}
	}
	if virtualServers > limits.MaxSetEntriesPerService {
		return fmt.Sprintf("it needs up to %d virtual servers (%d ports on %d addresses and node ports), each a member of the ownership record, more than the %d members a Service may have in a set (--ipset-max-elements-per-service); the Service is not programmed",
			virtualServers, len(ports), addresses, limits.MaxSetEntriesPerService)
	}
	return ""
}

// exceeds says why the built st is beyond a per-Service cap, or "".
func (b *builder) exceeds(st *ServiceState) string {
	limits := b.cfg.Limits
	if realServers := st.RealServerCount(); realServers > limits.MaxRealServersPerService {
		return fmt.Sprintf("it needs %d real servers, more than the %d a Service may have (--ipvs-max-real-servers-per-service); the Service is not programmed", realServers, limits.MaxRealServersPerService)
	}
	for set, n := range st.OwnSetEntries() {
		if n > limits.MaxSetEntriesPerService {
			return fmt.Sprintf("it needs %d members in ipset %s, more than the %d a Service may have in a set (--ipset-max-elements-per-service); the Service is not programmed", n, set, limits.MaxSetEntriesPerService)
		}
	}
	return ""
}

// OwnSetEntries counts, per set, the members st wants, the ownership
// record's included (one per virtual server).
func (st *ServiceState) OwnSetEntries() map[string]int {
	counts := map[string]int{}
	for k := range st.SetEntryKeys() {
		counts[k.Set]++
	}
	seen := make(map[ipvs.VirtualServerKey]bool, len(st.VirtualServers))
	for i := range st.VirtualServers {
		k := st.VirtualServers[i].VirtualServerKey
		if !seen[k] {
			seen[k] = true
			set, _ := owned.Record(k)
			counts[set]++
		}
	}
	return counts
}

// RealServerCount is how many real servers st's virtual servers have; 0
// for nil (a Service gone).
func (st *ServiceState) RealServerCount() int {
	if st == nil {
		return 0
	}
	n := 0
	for i := range st.VirtualServers {
		n += len(st.VirtualServers[i].RealServers)
	}
	return n
}

// tooLargeState is st's identity and problems with nothing to program, and
// the problem why.
func tooLargeState(st *ServiceState, ref v1.ObjectReference, why string) *ServiceState {
	out := &ServiceState{Name: st.Name, created: st.created, Problems: st.Problems}
	out.Problems = append(out.Problems, Problem{Object: ref, Reason: ReasonServiceTooLarge, Message: why})
	return out
}

// What one Service's problems may cost: every node keeps them with its
// state. A message quotes the object's own text (an annotation may be 256
// KiB, and %q makes a byte four), so it is cut, and past maxProblems one
// problem says how many more there were.
const (
	maxProblemMessage = 1024
	maxProblems       = 64
	// maxQuoted is how much of a value a message quotes.
	maxQuoted = 64
)

// boundProblems keeps at most maxProblems of ps, each message at most
// maxProblemMessage bytes; the last kept says how many were left out.
func boundProblems(ps []Problem) []Problem {
	for i := range ps {
		ps[i].Message = truncate(ps[i].Message, maxProblemMessage)
	}
	if len(ps) <= maxProblems {
		return ps
	}
	more := len(ps) - maxProblems + 1
	out := append([]Problem(nil), ps[:maxProblems-1]...)
	last := ps[maxProblems-1]
	last.Message = fmt.Sprintf("%d more problems of this Service and its EndpointSlices are not listed; the first: %s", more, last.Message)
	last.Message = truncate(last.Message, maxProblemMessage)
	return append(out, last)
}

// truncate cuts s to at most max bytes on a rune boundary, saying how long
// it was.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	suffix := fmt.Sprintf("… (%d bytes)", len(s))
	cut := max - len(suffix)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + suffix
}

// quoted is %q of at most maxQuoted bytes of s: a message names a value
// without copying all of it.
func quoted(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("… (%d bytes)", len(s))
}
