package main

import (
	"fmt"
	"net"
	"time"
)

// udpResult is udp's output: request/response exchanges per second, each from a new source
// port (as a DNS client asks), so each is a new flow through the proxy.
type udpResult struct {
	To        string  `json:"to"`
	Seconds   float64 `json:"seconds"`
	Answered  int     `json:"answered"`
	Lost      int     `json:"lost"`
	PerSecond float64 `json:"per_s"`
	P50       float64 `json:"p50_ms"`
	P99       float64 `json:"p99_ms"`
}

func udpRate(to string, duration, timeout time.Duration) (*udpResult, error) {
	raddr, err := net.ResolveUDPAddr("udp", to)
	if err != nil {
		return nil, err
	}
	r := &udpResult{To: to}
	buf := make([]byte, 2048)
	var times []time.Duration
	start := time.Now()
	deadline := start.Add(duration)
	var lastErr error
	for time.Now().Before(deadline) {
		t := time.Now()
		c, err := net.DialUDP("udp", nil, raddr)
		if err != nil {
			return nil, err
		}
		_ = c.SetDeadline(t.Add(timeout))
		if _, err = c.Write([]byte("loadgen")); err == nil {
			_, err = c.Read(buf)
		}
		_ = c.Close()
		if err != nil {
			r.Lost++
			lastErr = err
			continue
		}
		r.Answered++
		times = append(times, time.Since(t))
	}
	secs := time.Since(start).Seconds()
	r.Seconds, r.PerSecond = round3(secs), round3(float64(r.Answered)/secs)
	if r.Answered == 0 {
		return r, fmt.Errorf("no answer from %s: %v", to, lastErr)
	}
	s := summarize(times)
	r.P50, r.P99 = s.p50, s.p99
	return r, nil
}
