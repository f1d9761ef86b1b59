package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// connectResult is connect's output: the time from connect(2) to the handshake's end, in
// milliseconds, over the connections that opened.
type connectResult struct {
	To     string  `json:"to"`
	N      int     `json:"n"`
	Failed int     `json:"failed"`
	P50    float64 `json:"p50_ms"`
	P90    float64 `json:"p90_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
	Mean   float64 `json:"mean_ms"`
	// Over1s counts handshakes that took a second or more: a SYN the path dropped and the
	// client sent again, not a slow path.
	Over1s int `json:"over_1s"`
}

// dialAndReset opens one connection and closes it with a reset.
func dialAndReset(d *net.Dialer, to string) (time.Duration, error) {
	t := time.Now()
	c, err := d.Dial("tcp", to)
	took := time.Since(t)
	if err != nil {
		return took, err
	}
	_ = c.(*net.TCPConn).SetLinger(0)
	_ = c.Close()
	return took, nil
}

func connectTimes(to string, n int, timeout time.Duration) (*connectResult, error) {
	if to == "" || n <= 0 {
		return nil, fmt.Errorf("need -to and -n > 0")
	}
	d := &net.Dialer{Timeout: timeout}
	times := make([]time.Duration, 0, n)
	r := &connectResult{To: to}
	var lastErr error
	for i := 0; i < n; i++ {
		took, err := dialAndReset(d, to)
		if err != nil {
			r.Failed++
			lastErr = err
			continue
		}
		times = append(times, took)
	}
	r.N = len(times)
	if r.N == 0 {
		return nil, fmt.Errorf("no connection to %s opened: %v", to, lastErr)
	}
	s := summarize(times)
	r.P50, r.P90, r.P99, r.Max, r.Mean = s.p50, s.p90, s.p99, s.max, s.mean
	for _, t := range times {
		if t >= time.Second {
			r.Over1s++
		}
	}
	return r, nil
}

// rateResult is rate's output: connections opened and reset per second with several
// connectors, and the guest's CPU over the run (all of it: the one vCPU runs the client, the
// path and the server).
type rateResult struct {
	To          string  `json:"to"`
	Workers     int     `json:"workers"`
	Seconds     float64 `json:"seconds"`
	Connections int64   `json:"connections"`
	Failed      int64   `json:"failed"`
	PerSecond   float64 `json:"per_s"`
	cpuUse
}

func connectRate(to string, duration time.Duration, workers int, timeout time.Duration) (*rateResult, error) {
	if to == "" || workers <= 0 {
		return nil, fmt.Errorf("need -to and -workers > 0")
	}
	d := &net.Dialer{Timeout: timeout}
	var ok, failed atomic.Int64
	cpu0, err := readCPU()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	deadline := start.Add(duration)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if _, err := dialAndReset(d, to); err != nil {
					failed.Add(1)
					continue
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	cpu1, err := readCPU()
	if err != nil {
		return nil, err
	}
	r := &rateResult{To: to, Workers: workers, Seconds: round3(secs), Connections: ok.Load(), Failed: failed.Load(),
		PerSecond: round3(float64(ok.Load()) / secs)}
	r.cpuUse = cpu1.since(cpu0, ok.Load())
	if r.Connections == 0 {
		return r, fmt.Errorf("no connection to %s opened", to)
	}
	return r, nil
}

// holdResult is hold's output, printed once the connections are open.
type holdResult struct {
	To      string  `json:"to"`
	Held    int     `json:"held"`
	Failed  int     `json:"failed"`
	Seconds float64 `json:"open_s"`
}

// hold opens n connections to to, spread over the source addresses from, and keeps them open
// until SIGTERM or SIGINT: the proxies' connection tables hold them as established flows.
func hold(to string, n, workers int, from string, timeout time.Duration, ready string) error {
	if to == "" || n <= 0 || workers <= 0 {
		return fmt.Errorf("need -to, -n > 0 and -workers > 0")
	}
	var sources []net.IP
	for _, s := range strings.Split(from, ",") {
		if s == "" {
			continue
		}
		ip := net.ParseIP(s)
		if ip == nil {
			return fmt.Errorf("-from: %q is not an address", s)
		}
		sources = append(sources, ip)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	start := time.Now()
	conns, failed := openConnections(to, n, workers, sources, timeout)
	r := &holdResult{To: to, Held: len(conns), Failed: failed, Seconds: round3(time.Since(start).Seconds())}
	// Printed now, not at exit: the caller measures while the connections stay open.
	printJSON(r)
	if ready != "" {
		if err := os.WriteFile(ready, []byte(fmt.Sprintln(r.Held)), 0o644); err != nil {
			return err
		}
	}
	<-stop
	return nil
}

// openConnections opens n connections to to with workers connectors, the i-th from
// sources[i % len(sources)] (any source when there are none), and returns those that opened
// and how many did not.
func openConnections(to string, n, workers int, sources []net.IP, timeout time.Duration) ([]net.Conn, int) {
	var next, failed atomic.Int64
	conns := make([]net.Conn, n)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				d := &net.Dialer{Timeout: timeout}
				if len(sources) > 0 {
					d.LocalAddr = &net.TCPAddr{IP: sources[i%len(sources)]}
				}
				c, err := d.Dial("tcp", to)
				if err != nil {
					if failed.Add(1) == 1 {
						fmt.Fprintf(os.Stderr, "loadgen hold: %v\n", err)
					}
					continue
				}
				conns[i] = c
				if i > 0 && i%10000 == 0 {
					fmt.Fprintf(os.Stderr, "loadgen hold: %d opened after %.1fs\n", i, time.Since(start).Seconds())
				}
			}
		}()
	}
	wg.Wait()
	return slices.DeleteFunc(conns, func(c net.Conn) bool { return c == nil }), int(failed.Load())
}

// sink listens and never accepts: the kernel completes each handshake and keeps the
// connection in the listener's queue (as long as net.core.somaxconn allows), so a hundred
// thousand held connections cost no goroutine and no user-space memory on the server's side.
func sink(listen, ready string) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	if ready != "" {
		if err := os.WriteFile(ready, []byte("listening\n"), 0o644); err != nil {
			return err
		}
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	return nil
}
