package main

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/kubeapi"
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/kubeapi/kubeapitest"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// advertising answers /api with the server addresses given, or err.
type advertising struct {
	kubeapi.Client
	addresses []string
	err       error
}

func (a advertising) APIVersions(context.Context) (*metav1.APIVersions, error) {
	if a.err != nil {
		return nil, a.err
	}
	v := &metav1.APIVersions{Versions: []string{"v1"}}
	for _, s := range a.addresses {
		v.ServerAddressByClientCIDRs = append(v.ServerAddressByClientCIDRs, metav1.ServerAddressByClientCIDR{ClientCIDR: "0.0.0.0/0", ServerAddress: s})
	}
	return v, nil
}

// The daemon protects the API server it dials (an address, or a name
// resolved to every address) and the address the API server advertises;
// what it cannot find is left out, the rest kept.
func TestFindAPIServers(t *testing.T) {
	names := map[string][]netip.Addr{
		"api.example.test": {netip.MustParseAddr("192.0.2.253"), netip.MustParseAddr("2001:db8::253"), netip.MustParseAddr("::ffff:192.0.2.253")},
		"cp1.example.test": {netip.MustParseAddr("192.0.2.100")},
	}
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, ok := names[host]; ok {
			return a, nil
		}
		return nil, errors.New("no such host")
	}
	dials := func(server string) string { return "the host this node's ipvsproxy dials, " + server }
	advertised := func(server string) string { return "its advertised address, " + server }
	a := func(addr, source string) ipvsproxy.APIServerAddress {
		return ipvsproxy.APIServerAddress{Addr: netip.MustParseAddr(addr), Source: source}
	}
	for _, tc := range []struct {
		name, server string
		api          advertising
		want         []ipvsproxy.APIServerAddress
	}{
		{"a VIP and the advertised address", "https://192.0.2.253:6443", advertising{addresses: []string{"192.0.2.100:6443"}},
			[]ipvsproxy.APIServerAddress{a("192.0.2.253", dials("https://192.0.2.253:6443")), a("192.0.2.100", advertised("192.0.2.100:6443"))}},
		{"names resolved, both families", "https://api.example.test:6443", advertising{addresses: []string{"cp1.example.test:6443"}},
			[]ipvsproxy.APIServerAddress{a("192.0.2.253", dials("https://api.example.test:6443")), a("2001:db8::253", dials("https://api.example.test:6443")),
				a("192.0.2.100", advertised("cp1.example.test:6443"))}},
		{"IPv6, host:port without scheme", "[2001:db8::10]:6443", advertising{addresses: []string{"[2001:db8::10]:6443"}},
			[]ipvsproxy.APIServerAddress{a("2001:db8::10", dials("[2001:db8::10]:6443"))}},
		{"in-cluster: default/kubernetes's cluster IP (the guard lets it be)", "https://10.96.0.1:443", advertising{addresses: []string{"192.0.2.100:6443"}},
			[]ipvsproxy.APIServerAddress{a("10.96.0.1", dials("https://10.96.0.1:443")), a("192.0.2.100", advertised("192.0.2.100:6443"))}},
		{"loopback advertised, a name that does not resolve", "https://nowhere.example.test:6443", advertising{addresses: []string{"127.0.0.1:6443"}}, nil},
		{"no discovery", "https://192.0.2.253:6443", advertising{err: errors.New("forbidden")},
			[]ipvsproxy.APIServerAddress{a("192.0.2.253", dials("https://192.0.2.253:6443"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.api.Client = kubeapitest.FromClientset(fake.NewClientset())
			got := findAPIServers(context.Background(), tc.server, tc.api, resolve)
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// The host the daemon dials is its kubeconfig's server: the kubeadm
// overlay's kubeconfig.conf (kube-proxy's, from config.conf), whose server is
// kubeadm's controlPlaneEndpoint, the address every kubelet dials too.
func TestTheKubeconfigsServerIsTheHostDialled(t *testing.T) {
	_, _, server, err := newClients(writeKubeconfig(t, "https://192.0.2.253:6443"))
	if err != nil {
		t.Fatal(err)
	}
	got := findAPIServers(context.Background(), server, advertising{Client: kubeapitest.FromClientset(fake.NewClientset())}, lookupHost)
	if len(got) != 1 || got[0].Addr != netip.MustParseAddr("192.0.2.253") {
		t.Errorf("found %+v, want 192.0.2.253 from the kubeconfig's server", got)
	}
}
