package proxier

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"

	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// clusterReporters is how many nodes post the Event of a problem every node
// finds alike (ScopeCluster): more than one, so a node that is down or
// partitioned does not hide it, and not all of them, so 1,000 bad Services
// on 100 nodes are 2,000 Events, not 100,000.
const clusterReporters = 2

// reportProblems logs and posts an Event for each problem of a Service that was not
// reported at its last report: a problem is posted once while it lasts, and
// again only after it went away and came back. Cluster-wide problems are
// posted by the designated nodes only (reportsClusterProblems); node facts
// by this node; legal input is only logged.
func (p *Proxier) reportProblems(name types.NamespacedName, conflicts []ipvsproxy.Problem) {
	var problems []ipvsproxy.Problem
	if st := p.desired.Services[name]; st != nil {
		problems = append(append(problems, st.Problems...), conflicts...)
	}
	if len(problems) == 0 {
		delete(p.reported, name)
		return
	}
	before, now := p.reported[name], make(map[string]bool, len(problems))
	var designated *bool
	for _, pr := range problems {
		key := pr.String()
		if now[key] {
			continue
		}
		now[key] = true
		if before[key] {
			continue
		}
		object := pr.Object.Kind + "/" + pr.Object.Namespace + "/" + pr.Object.Name
		if pr.Scope == ipvsproxy.ScopeLog {
			klog.V(2).InfoS("Handled legal input", "object", object, "reason", pr.Reason, "message", pr.Message)
			continue
		}
		klog.InfoS("Skipping bad input", "object", object, "reason", pr.Reason, "message", pr.Message)
		if pr.Scope == ipvsproxy.ScopeCluster {
			if designated == nil {
				d := p.reportsClusterProblems(name)
				designated = &d
			}
			if !*designated {
				continue
			}
		}
		ref := pr.Object
		p.recorder.Eventf(&ref, v1.EventTypeWarning, pr.Reason, "%s", pr.Message)
	}
	p.reported[name] = now
}

// reportsClusterProblems says whether this node is one of the
// clusterReporters nodes that post a Service's cluster-wide problems: those
// whose hash of (Service, node) is highest (rendezvous hashing), so every
// node agrees on them from the Node list alone, and a Node's coming or going
// moves only the Services it reported. A node that does not know the Node
// list (or is not in it yet) reports everything.
func (p *Proxier) reportsClusterProblems(name types.NamespacedName) bool {
	nodes := p.clusterNodes.Names()
	if !slices.Contains(nodes, p.nodeName) {
		return true
	}
	return slices.Contains(designatedReporters(name, nodes, clusterReporters), p.nodeName)
}

// designatedReporters are the n nodes with the highest rendezvous score for
// the Service.
func designatedReporters(name types.NamespacedName, nodes []string, n int) []string {
	type scored struct {
		node  string
		score uint64
	}
	all := make([]scored, 0, len(nodes))
	for _, node := range nodes {
		// A hash whose every bit depends on every input byte: names that
		// differ in their last characters must still score unrelated.
		sum := sha256.Sum256([]byte(name.String() + "\x00" + node))
		all = append(all, scored{node, binary.BigEndian.Uint64(sum[:8])})
	}
	slices.SortFunc(all, func(a, b scored) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		if a.node < b.node {
			return -1
		}
		return 1
	})
	out := make([]string, 0, n)
	for i := 0; i < len(all) && i < n; i++ {
		out = append(out, all[i].node)
	}
	return out
}
