package main

import (
	"fmt"
	"net"
)

// serveUDP answers each datagram from the same socket, so the reply leaves with the source the
// client sent to (after IPVS and conntrack reverse their NAT) and a client can tell which
// endpoint answered from hostname= and server_address=.
func serveUDP(conn net.PacketConn, name string) error {
	server := localAddress(conn.LocalAddr())
	buf := make([]byte, 2048)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return fmt.Errorf("read udp on %s: %w", conn.LocalAddr(), err)
		}
		reply := udpReply(name, server, from.String(), buf[:n])
		if _, err := conn.WriteTo(reply, from); err != nil {
			// One unreachable client must not stop the server; the next datagram may work.
			continue
		}
	}
}

func udpReply(name, server, client string, payload []byte) []byte {
	return []byte(fmt.Sprintf("hostname=%s\nserver_address=%s\nclient_address=%s\npayload=%s\n",
		name, server, client, payload))
}

// localAddress names the socket's address; for a wildcard listener it picks the first global
// unicast address of the host, which in a pod's namespace is the pod IP.
func localAddress(a net.Addr) string {
	ua, ok := a.(*net.UDPAddr)
	if !ok || !ua.IP.IsUnspecified() {
		return a.String()
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return a.String()
	}
	for _, ia := range addrs {
		if ipn, ok := ia.(*net.IPNet); ok && ipn.IP.IsGlobalUnicast() {
			return net.JoinHostPort(ipn.IP.String(), fmt.Sprint(ua.Port))
		}
	}
	return a.String()
}
