package iptables

import (
	"bufio"
	"bytes"
	"strings"
)

// Backend is the iptables implementation the host uses: the legacy
// x_tables kernel interface or nf_tables through iptables-nft. Rules written
// with one are invisible to the other, so ipvsproxy must use the same one as
// the rest of the node (kubelet, the CNI plugin); otherwise packets pass
// through two sets of chains in an order nobody chose.
type Backend string

const (
	BackendLegacy Backend = "legacy"
	BackendNFT    Backend = "nft"
)

// kubeletHintChains are the chains kubelet (1.17 and later) creates in the
// mangle table so that other components can tell which back end it chose.
var kubeletHintChains = []string{"KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY"}

// chooseBackend decides between the back ends from what iptables-legacy-save
// and iptables-nft-save printed (IPv4 and IPv6 output concatenated; empty if
// the command failed), the way kube-proxy's iptables-wrapper does
// (kubernetes-sigs/iptables-wrappers):
//
//  1. a kubelet hint chain in the nft output means nft, then the same for
//     legacy (kubelet has picked, follow it);
//  2. otherwise the side with more rules ("-A" lines) wins;
//  3. a tie, including a host with no rules at all, means nft, the default
//     of every current distribution.
func chooseBackend(legacySave, nftSave []byte) Backend {
	if hasKubeletHint(nftSave) {
		return BackendNFT
	}
	if hasKubeletHint(legacySave) {
		return BackendLegacy
	}
	if countRules(legacySave) > countRules(nftSave) {
		return BackendLegacy
	}
	return BackendNFT
}

func hasKubeletHint(save []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(save))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, hint := range kubeletHintChains {
			if strings.HasPrefix(line, ":"+hint+" ") {
				return true
			}
		}
	}
	return false
}

// countRules counts rule lines; the wrapper's `grep '^-' | wc -l`.
func countRules(save []byte) int {
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(save))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "-") {
			n++
		}
	}
	return n
}
