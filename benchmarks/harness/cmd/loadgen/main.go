// Command loadgen is the data-plane tier's traffic (e2e/vm/bench-dataplane-guest.sh), run
// inside the VM's network namespaces. Each mode prints one JSON object on stdout.
//
//	loadgen connect -to ADDR -n 2000             TCP connect time, one connection at a time
//	loadgen rate -to ADDR -duration 10s          new TCP connections per second, and the guest's CPU per connection
//	loadgen udp -to ADDR -duration 5s            UDP request/response rate, a new source port per request
//	loadgen hold -to ADDR -n 100000 -from A,B    opens N connections and keeps them until SIGTERM
//	loadgen sink -listen :9090                   a listener that never accepts: held connections cost no process
//
// A connection that connect or rate opens is closed with a reset (SO_LINGER 0), so neither end
// keeps it in TIME_WAIT and the client's ports last the run; the proxies' connection tables see
// it close as a browser's aborted request would.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	mode, args := os.Args[1], os.Args[2:]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	to := fs.String("to", "", "HOST:PORT to connect to")
	n := fs.Int("n", 2000, "connect: connections to time; hold: connections to open")
	duration := fs.Duration("duration", 10*time.Second, "rate, udp: how long to run")
	workers := fs.Int("workers", 4, "rate, hold: concurrent connectors")
	from := fs.String("from", "", "hold: comma-separated source addresses to spread the connections over")
	timeout := fs.Duration("timeout", 3*time.Second, "a connect's or a UDP reply's timeout")
	listen := fs.String("listen", ":9090", "sink: TCP address to listen on")
	ready := fs.String("ready", "", "hold, sink: a file written once the connections are open or the listener listens")
	_ = fs.Parse(args)
	var out any
	var err error
	switch mode {
	case "connect":
		out, err = connectTimes(*to, *n, *timeout)
	case "rate":
		out, err = connectRate(*to, *duration, *workers, *timeout)
	case "udp":
		out, err = udpRate(*to, *duration, *timeout)
	case "hold":
		err = hold(*to, *n, *workers, *from, *timeout, *ready)
	case "sink":
		err = sink(*listen, *ready)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "loadgen %s: %v\n", mode, err)
		os.Exit(1)
	}
	if out != nil {
		b, _ := json.Marshal(out)
		fmt.Println(string(b))
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: loadgen connect|rate|udp|hold|sink [flags]")
	os.Exit(2)
}
