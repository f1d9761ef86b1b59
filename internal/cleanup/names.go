package cleanup

import (
	"slices"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
)

// bothFamilies: the names a clean-up decides by are those of either family,
// whichever the node ran.
var bothFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}

// installedHere reports whether ipvsproxy's state is on the node: a set of
// present that only ipvsproxy makes (oursAloneSets: the record set
// KUBE-IPVS-OWNED, KUBE-SERVICE-CIDRS, KUBE-IPVS-SERVICES, ... or the
// temporary twin of any owned set). ipvsproxy creates the record set before
// its other sets and Installed destroys it last, so a failed clean-up run
// again still finds it. Without one, the chains, the sets and kube-ipvs0 whose
// names kube-proxy's IPVS mode shares are kube-proxy's: after `cleanup
// --after-kube-proxy-ipvs` handed the node back, or on a node ipvsproxy
// never ran on; Installed then leaves them.
func installedHere(present []ipset.Set) bool {
	alone := oursAloneSets(bothFamilies)
	for _, s := range owned.Sets(bothFamilies, 0) {
		alone[owned.TempSetName(s.Name)] = true
	}
	return slices.ContainsFunc(present, func(s ipset.Set) bool { return alone[s.Name] })
}

// oursAloneSets are the names, for the families and with their temporary
// twins, of ipvsproxy's sets that kube-proxy's IPVS mode does not use.
func oursAloneSets(families []v1.IPFamily) map[string]bool {
	theirs := kubeProxySetNames()
	out := map[string]bool{}
	for _, s := range owned.Sets(families, 0) {
		if !theirs[s.Name] {
			out[s.Name], out[owned.TempSetName(s.Name)] = true, true
		}
	}
	return out
}

// isRecordSet reports whether name is a family's ownership record set
// (KUBE-IPVS-OWNED) or its temporary twin.
func isRecordSet(name string) bool {
	return owned.BaseName(strings.TrimSuffix(name, owned.TempSetSuffix)) == owned.SetOwned
}

// recordLast orders the ownership record sets after the other sets: a
// clean-up that fails before the record goes can run again and still knows
// the node's state for ipvsproxy's.
func recordLast(a, b ipset.Set) int {
	switch ra, rb := isRecordSet(a.Name), isRecordSet(b.Name); {
	case ra == rb:
		return 0
	case ra:
		return 1
	}
	return -1
}

// referencesAny reports whether a saved rule jumps to one of names or
// matches a set of names.
func referencesAny(line string, names map[string]bool) bool {
	fields := strings.Fields(line)
	for i := 0; i+1 < len(fields); i++ {
		switch fields[i] {
		case "-j", "-g", "--match-set":
			if names[fields[i+1]] {
				return true
			}
		}
	}
	return false
}
