package iptables

import (
	"slices"
	"testing"
)

func TestSavedRules(t *testing.T) {
	got := SavedRules([]byte(kubeRuleSet{family: IPv4}.savedNAT()))
	wantMasq := []string{"-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000"}
	if !slices.Equal(got["KUBE-MARK-MASQ"], wantMasq) {
		t.Errorf("KUBE-MARK-MASQ = %q, want %q", got["KUBE-MARK-MASQ"], wantMasq)
	}
	if n := len(got["KUBE-POSTROUTING"]); n != 4 {
		t.Errorf("KUBE-POSTROUTING has %d rules, want 4", n)
	}
	if rules, ok := got["PREROUTING"]; !ok || len(rules) != 0 {
		t.Errorf("PREROUTING = %q, %v; want declared and empty", rules, ok)
	}
	if _, ok := got["KUBE-MISSING"]; ok {
		t.Error("an undeclared chain is present")
	}
	if len(got) != 9 {
		t.Errorf("got %d chains, want 9 (4 built-in, 5 KUBE-*)", len(got))
	}
}
