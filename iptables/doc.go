// Package iptables applies rule sets with iptables-restore --noflush, one
// transaction per call, and makes sure the few jump rules in built-in chains
// exist. It runs the legacy or nft back end, whichever the host already uses
// (detected the way kube-proxy's iptables-wrapper does).
//
// It never flushes or deletes a chain it is not told to. Fake parses the same
// restore format and keeps the tables in memory, failing where
// iptables-restore would (a jump to a missing chain, deleting a chain that is
// referenced or missing) and applying each restore atomically.
package iptables
