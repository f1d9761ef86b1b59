package conntrack

import (
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
)

// lab is two network namespaces joined by a veth pair: the client
// (192.0.2.1/24, 2001:db8::1/64) whose conntrack table is under test, and the
// server (192.0.2.2/24, 2001:db8::2/64). No packet leaves them.
type lab struct {
	client netns.NsHandle
	table  *Table
}

// newLab builds the namespaces, creates labFlows in the client's conntrack
// table by sending one UDP datagram per flow, and opens a Table there. It
// skips unless root with ip (iproute2) and iptables/ip6tables available.
func newLab(t *testing.T) *lab {
	kerneltest.RequireRootAndTools(t, "ip", "iptables", "ip6tables")
	h, clientPath := netnstest.NewNamed(t, "ipvsproxy-ct-")
	_, serverPath := netnstest.NewNamed(t, "ipvsproxy-ct-")
	client, server := strings.TrimPrefix(clientPath, "/run/netns/"), strings.TrimPrefix(serverPath, "/run/netns/")
	for _, cmd := range [][]string{
		{"ip", "-n", client, "link", "add", "veth-c", "type", "veth", "peer", "name", "veth-s", "netns", server},
		{"ip", "-n", client, "addr", "add", "192.0.2.1/24", "dev", "veth-c"},
		{"ip", "-n", client, "addr", "add", "2001:db8::1/64", "dev", "veth-c", "nodad"},
		{"ip", "-n", server, "addr", "add", "192.0.2.2/24", "dev", "veth-s"},
		{"ip", "-n", server, "addr", "add", "2001:db8::2/64", "dev", "veth-s", "nodad"},
		{"ip", "-n", client, "link", "set", "veth-c", "up"},
		{"ip", "-n", server, "link", "set", "veth-s", "up"},
		// The service addresses are routed to the server, as a node
		// routes a ClusterIP before kube-proxy's DNAT rewrites it.
		{"ip", "-n", client, "route", "add", "198.51.100.0/24", "via", "192.0.2.2"},
		// Conntrack tracks a namespace's packets only once something in
		// it needs conntrack (nf_ct_netns_get): here the IPv4 nat rules
		// and, for IPv6, a conntrack match. Without rules the table stays
		// empty whatever the traffic.
		{"ip", "netns", "exec", client, "iptables", "-w", "-t", "nat", "-A", "OUTPUT", "-p", "udp",
			"-d", "198.51.100.10", "--dport", "80", "-j", "DNAT", "--to-destination", "192.0.2.2:8080"},
		{"ip", "netns", "exec", client, "iptables", "-w", "-t", "nat", "-A", "OUTPUT", "-p", "udp",
			"-d", "198.51.100.11", "--dport", "53", "-j", "DNAT", "--to-destination", "192.0.2.2:5353"},
		{"ip", "netns", "exec", client, "ip6tables", "-w", "-A", "OUTPUT",
			"-m", "conntrack", "--ctstate", "NEW", "-j", "ACCEPT"},
	} {
		run(t, cmd...)
	}
	l := &lab{client: h}
	for _, flow := range labFlows {
		// sendto runs the netfilter hooks synchronously, so the flow is
		// in the table (confirmed at POSTROUTING) when it returns.
		l.sendUDP(t, flow)
	}
	tbl, err := NewInNamespace(int(h))
	if errors.Is(err, ErrUnsupported) {
		kerneltest.Skip(t, kerneltest.NoKernelFeature, "kernel has no conntrack netlink: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tbl.Close() })
	if _, err := tbl.Flows(4); errors.Is(err, ErrUnsupported) {
		kerneltest.Skip(t, kerneltest.NoKernelFeature, "kernel has no conntrack netlink: %v", err)
	}
	l.table = tbl
	return l
}

// sendUDP sends one datagram from flow.OrigSrc to flow.OrigDst inside the
// client namespace. Only the socket's creation needs the namespace: a socket
// stays in the namespace it was created in.
func (l *lab) sendUDP(t *testing.T, flow Flow) {
	t.Helper()
	var conn *net.UDPConn
	var err error
	netnstest.In(t, l.client, func() { conn, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(flow.OrigSrc)) })
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.WriteToUDPAddrPort([]byte("ipvsproxy conntrack test"), flow.OrigDst); err != nil {
		t.Fatalf("send %s: %v", flow, err)
	}
}

func run(t *testing.T, cmd ...string) {
	t.Helper()
	if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd, err, out)
	}
}

// TestDeleteVanishedFlow deletes flows that are already gone, as when a flow
// expires between DeleteFlows' dump and its delete: not an error, not counted.
func TestDeleteVanishedFlow(t *testing.T) {
	l := newLab(t)
	var stale []kernelFlow
	for _, af := range []uint8{unix.AF_INET, unix.AF_INET6} {
		if err := streamFlows(l.table.dump, af, 0, func(b []kernelFlow) error { stale = append(stale, b...); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	all := Filter{Protocol: UDP}
	if n, err := l.table.DeleteFlows(all); err != nil || n != len(labFlows) {
		t.Fatalf("DeleteFlows = %d, %v; want %d, nil", n, err, len(labFlows))
	}
	if n, err := l.table.deleteMatching(stale, all.Matches); err != nil || n != 0 {
		t.Fatalf("deleting vanished flows = %d, %v; want 0, nil", n, err)
	}
}
