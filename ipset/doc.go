// Package ipset creates, fills and destroys the kernel's IP sets through
// netlink (github.com/vishvananda/netlink); it never runs the ipset binary.
//
// It writes only what it is told: which sets belong to the proxier is decided
// by internal/owned (their names and types) and internal/proxier (what it
// writes). Fake keeps sets in memory and enforces the kernel's
// rules (duplicate entries fail, entries must fit the set's type and family,
// a set referenced elsewhere cannot be destroyed when marked busy).
//
// Two requests bypass the library because v1.3.1 encodes them wrongly for our
// purpose (request.go): destroy, which it sends without NLM_F_EXCL so that a
// missing set "succeeds", and bitmap:port add/delete, where it adds a
// protocol attribute the kernel refuses. Sets are created with the kernel's
// default hashsize 1024 and the maxelem asked for (the kernel's 65536 by
// default); the Fake refuses an entry beyond maxelem as the kernel does.
package ipset
