// Command echoserver answers like the echoserver of the Kubernetes source-IP tutorial, so the
// end-to-end scenarios can read which client address reached a pod:
//
//	CLIENT VALUES:
//	client_address=10.244.3.8
//	command=GET
//	...
//
// Over UDP it answers every datagram with its own name and address and the client's, so a UDP
// client can tell which endpoint replied (the stale-conntrack scenario needs exactly that).
// GET /stream answers a line every 100 ms until the client hangs up, so a scenario can measure
// whether one established connection kept flowing (the largest gap between lines).
package main

import (
	"errors"
	"flag"
	"log"
	"net"
	"net/http"
	"os"
	"time"
)

func main() {
	httpAddr := flag.String("http", ":8080", "TCP address for HTTP; empty disables")
	udpAddr := flag.String("udp", ":8081", "UDP address for the datagram echo; empty disables")
	name := flag.String("name", "", "name reported as hostname= (default: the host name)")
	measure := flag.String("measure", "", "client mode: tcp (one connection to ADDR's /stream) or udp (a datagram per 100 ms from one port); prints the longest gap at SIGTERM")
	to := flag.String("to", "", "with -measure: the address to stream from, HOST:PORT")
	flag.Parse()
	if *measure != "" {
		measureStream(*measure, *to)
		return
	}
	if *name == "" {
		*name, _ = os.Hostname()
	}
	if *httpAddr == "" && *udpAddr == "" {
		log.Fatal("echoserver: nothing to serve: both -http and -udp are empty")
	}

	errs := make(chan error, 2)
	if *udpAddr != "" {
		conn, err := net.ListenPacket("udp", *udpAddr)
		if err != nil {
			log.Fatalf("echoserver: listen udp %s: %v", *udpAddr, err)
		}
		go func() { errs <- serveUDP(conn, *name) }()
	}
	if *httpAddr != "" {
		ln, err := net.Listen("tcp", *httpAddr)
		if err != nil {
			log.Fatalf("echoserver: listen tcp %s: %v", *httpAddr, err)
		}
		srv := &http.Server{
			Handler:           echoHandler(*name),
			ReadHeaderTimeout: 5 * time.Second,
		}
		go func() { errs <- srv.Serve(ln) }()
	}
	log.Printf("echoserver %s: http %q udp %q", *name, *httpAddr, *udpAddr)
	err := <-errs
	if errors.Is(err, net.ErrClosed) {
		return
	}
	log.Fatalf("echoserver: %v", err)
}
