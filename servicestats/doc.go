// Package servicestats exports per-Service traffic metrics (connections,
// packets and bytes) from the kernel's IPVS counters, summed over the
// virtual servers of each Service port (cluster IP, node ports, external
// and load balancer IPs). It is off by default (--metrics-per-service):
// one series per Service port and direction is a cardinality a large
// cluster must choose.
//
// It reads the counters on each scrape and never writes to the kernel.
package servicestats
