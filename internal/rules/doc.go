// Package rules is the iptables rules ipvsproxy writes for one IP family,
// in iptables-save's canonical form (so a saved table can be compared with
// them), and the packet tracer's model of those rules: one traced verdict per
// rule, walked with a snapshot's virtual servers and set members to answer
// `ipvsproxy inspect trace`. It computes text and verdicts only; the writer
// (package proxier) restores the text into the kernel.
package rules
