package main

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/iptables"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
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

// resolveFamilies turns --ip-families into a list; "auto" takes the
// families of the node's global unicast addresses (IPv4 when none).
func resolveFamilies(value string) ([]v1.IPFamily, error) {
	value = strings.TrimSpace(value)
	if value != "auto" && value != "" {
		var out []v1.IPFamily
		for _, s := range strings.Split(value, ",") {
			switch f := v1.IPFamily(strings.TrimSpace(s)); f {
			case v1.IPv4Protocol, v1.IPv6Protocol:
				out = append(out, f)
			default:
				return nil, fmt.Errorf("--ip-families: %q is not IPv4 or IPv6", s)
			}
		}
		return out, nil
	}
	n, err := netif.New(ipvsproxy.DummyInterface)
	if err != nil {
		return nil, err
	}
	addrs, err := n.HostAddresses()
	if err != nil {
		return nil, err
	}
	return familiesOf(addrs), nil
}

func familiesOf(addrs []netip.Addr) []v1.IPFamily {
	var v4, v6 bool
	for _, a := range addrs {
		if a.IsLoopback() || a.IsLinkLocalUnicast() || !a.IsGlobalUnicast() {
			continue
		}
		if a.Unmap().Is4() {
			v4 = true
		} else {
			v6 = true
		}
	}
	var out []v1.IPFamily
	if v4 || !v6 {
		out = append(out, v1.IPv4Protocol)
	}
	if v6 {
		out = append(out, v1.IPv6Protocol)
	}
	return out
}
