package main

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/iptables"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/ipvsproxy/ipvsproxy/listeners"
	"github.com/ipvsproxy/ipvsproxy/netif"
	"github.com/ipvsproxy/ipvsproxy/sysctl"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// kernelOption adjusts openKernel.
type kernelOption int

// ipvsIfPresent (cleanup) takes a kernel without IPVS as one with an empty
// IPVS table (ipvs.Unavailable) instead of failing.
const ipvsIfPresent kernelOption = 1

// openKernel opens the real adapters for the families.
func openKernel(families []v1.IPFamily, sysctlRoot string, opts ...kernelOption) (ipvsproxy.Kernel, func(), error) {
	var k ipvsproxy.Kernel
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	fail := func(err error) (ipvsproxy.Kernel, func(), error) {
		closeAll()
		return ipvsproxy.Kernel{}, func() {}, err
	}
	h, err := ipvs.New()
	if errors.Is(err, ipvs.ErrUnsupported) && slices.Contains(opts, ipvsIfPresent) {
		klog.InfoS("No IPVS in this kernel; cleaning everything else", "err", err)
		h, err = ipvs.Unavailable{}, nil
	}
	if err != nil {
		return fail(fmt.Errorf("open IPVS: %w", err))
	}
	k.IPVS = h
	closers = append(closers, func() { h.Close() })
	if k.Netif, err = netif.New(ipvsproxy.DummyInterface); err != nil {
		return fail(fmt.Errorf("open rtnetlink: %w", err))
	}
	sets, err := ipset.New()
	if err != nil {
		return fail(fmt.Errorf("open ipset: %w", err))
	}
	k.IPSet = sets
	ct, err := conntrack.New()
	if err != nil {
		return fail(fmt.Errorf("open conntrack: %w", err))
	}
	k.Conntrack = ct
	closers = append(closers, func() { ct.Close() })
	k.Sysctl = sysctl.NewAt(sysctlRoot)
	k.Listeners = listeners.New()
	// One detection for both families, so they cannot pick different back
	// ends.
	backend, err := iptables.Detect()
	if err != nil {
		return fail(fmt.Errorf("detect iptables back end: %w", err))
	}
	klog.InfoS("Using iptables back end", "backend", backend)
	k.IPTables = map[v1.IPFamily]iptables.Interface{}
	for _, f := range families {
		fam := iptables.IPv4
		if f == v1.IPv6Protocol {
			fam = iptables.IPv6
		}
		ipt, err := iptables.New(fam, iptables.WithBackend(backend))
		if err != nil {
			return fail(fmt.Errorf("open %s iptables: %w", f, err))
		}
		k.IPTables[f] = ipt
	}
	return k, closeAll, nil
}
