// Package iptables applies rule sets with iptables-restore --noflush, one
// transaction per call, and makes sure the few jump rules in built-in chains
// exist. It runs the legacy or nft back end, whichever the host already uses
// (detected the way kube-proxy's iptables-wrapper does).
//
// It never flushes or deletes a chain it is not told to. Fake parses the same
// restore format and keeps the tables in memory, failing where
// iptables-restore would (a jump to a missing chain, deleting a chain that is
// referenced or missing) and applying each table block atomically, as the
// kernel does.
//
// Files: iptables.go runs the binaries (New, Detect, options); command.go
// runs a command, optionally inside a network namespace (InNetNS, for
// tests); backend.go chooses legacy or nft from save outputs; rulefmt.go
// splits and prints rule arguments and documents the canonical form
// iptables-save prints, which callers must write so that Save equals what
// they restored; fake.go is the in-memory Fake.
//
// It never creates ipsets, interfaces or anything outside the iptables
// tables it is given.
package iptables
