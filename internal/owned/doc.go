// Package owned names what the proxier owns in the kernel: the KUBE-* ipsets
// of each family and their types, the iptables chains with the jump rules
// into them, the dummy link kube-ipvs0, and the format of the ownership
// record (KUBE-IPVS-OWNED) that says which virtual servers are ours.
//
// It is a leaf: the builder, the rules, the writer, host set-up and inspect
// all take these names from here, so none of them has to import another for
// a name. It holds names and pure functions on them only; it never touches
// the kernel.
package owned
