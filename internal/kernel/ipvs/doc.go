// Package ipvs reads and writes the kernel's IPVS table: virtual servers and
// their real servers, plus the IPVS connection timeouts.
//
// It owns nothing on its own: it writes exactly what it is told and never
// decides which virtual servers belong to the proxier (internal/proxier does,
// from the ownership record whose format internal/owned defines).
// The real implementation speaks generic netlink through github.com/moby/ipvs
// over one long-lived handle; Fake keeps the same table in memory and fails in
// the same places the kernel does.
package ipvs
