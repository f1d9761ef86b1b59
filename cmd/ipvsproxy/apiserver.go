package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/kubeapi"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"k8s.io/klog/v2"
)

// The API server's addresses for the address guard
// (ipvsproxy/addressguard.go). The endpoints of default/kubernetes name the
// API servers, but the nodes may dial something else (a VIP or load
// balancer: kubeadm's controlPlaneEndpoint, the KUBERNETES_SERVICE_HOST of
// deploy/overlays/example), and the endpoints may be missing (an API server
// run with --endpoint-reconciler-type=none). A Service that bound either on
// the nodes cut them off the API, and so from the deletion that would undo
// it. The daemon therefore protects the host it dials itself, resolved, and
// the address the API server advertises (its --advertise-address, in the
// serverAddressByClientCIDRs of discovery's /api). Both are read once at
// start; a name that resolves elsewhere later is protected from the next
// start, or named in --protect-addresses.

// resolver looks a host name up; lookupHost is the system's.
type resolver func(ctx context.Context, host string) ([]netip.Addr, error)

func lookupHost(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// findAPIServers returns the addresses of the API server that server (a
// rest.Config's Host: a URL or host:port) names and that client's API server
// advertises. What cannot be found is logged, not fatal: the endpoints of
// default/kubernetes and --protect-addresses still hold.
func findAPIServers(ctx context.Context, server string, client kubeapi.Client, resolve resolver) []ipvsproxy.APIServerAddress {
	ctx, cancel := context.WithTimeout(ctx, apiRequestTimeout)
	defer cancel()
	var out []ipvsproxy.APIServerAddress
	add := func(host, source string) {
		addrs, err := resolveHost(ctx, host, resolve)
		if err != nil {
			klog.ErrorS(err, "The API server's address is not protected from Services", "host", host, "source", source)
			return
		}
		for _, a := range addrs {
			// The guard only sees global unicast addresses (an API server
			// advertising 127.0.0.1 protects nothing).
			if a.IsGlobalUnicast() && !slices.ContainsFunc(out, func(s ipvsproxy.APIServerAddress) bool { return s.Addr == a }) {
				out = append(out, ipvsproxy.APIServerAddress{Addr: a, Source: source})
			}
		}
	}
	if host, err := hostOf(server); err != nil {
		klog.ErrorS(err, "The API server's address is not protected from Services", "server", server)
	} else {
		add(host, "the host this node's ipvsproxy dials, "+server)
	}
	versions, err := client.APIVersions(ctx)
	if err != nil {
		klog.ErrorS(err, "Reading the API server's advertised address from /api; it is protected only while an endpoint of default/kubernetes names it")
	} else {
		for _, s := range versions.ServerAddressByClientCIDRs {
			if host, err := hostOf(s.ServerAddress); err == nil {
				add(host, "its advertised address, "+s.ServerAddress)
			}
		}
	}
	var addrs []string
	for _, s := range out {
		addrs = append(addrs, s.Addr.String())
	}
	klog.InfoS("No Service may take the API server's addresses", "addresses", addrs)
	return out
}

// hostOf is the host of a server address: a URL, or host[:port].
func hostOf(server string) (string, error) {
	if !strings.Contains(server, "://") {
		server = "https://" + server
	}
	u, err := url.Parse(server)
	if err != nil {
		return "", fmt.Errorf("API server %q: %w", server, err)
	}
	if u.Hostname() == "" {
		return "", fmt.Errorf("API server %q names no host", server)
	}
	return u.Hostname(), nil
}

// resolveHost is host's addresses: itself when it is one, else what the
// resolver answers.
func resolveHost(ctx context.Context, host string, resolve resolver) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return nil, fmt.Errorf("%s: an address with a zone", host)
		}
		return []netip.Addr{a.Unmap()}, nil
	}
	found, err := resolve(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	var out []netip.Addr
	for _, a := range found {
		if a = a.Unmap().WithZone(""); !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("resolve %s: no address", host)
	}
	return out, nil
}
