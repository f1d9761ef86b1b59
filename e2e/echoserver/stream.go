package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// streamInterval is how often /stream writes a line and the UDP measurer sends a datagram: the
// migration scenarios read a gap in the stream as the time the connection stood still.
const streamInterval = 100 * time.Millisecond

// streamHandler keeps the response open and writes one line per interval until the client goes,
// so one long-lived TCP connection carries traffic without pause.
func streamHandler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		flusher, ok := w.(http.Flusher)
		if !ok {
			http.Error(w, "streaming unsupported", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		tick := time.NewTicker(streamInterval)
		defer tick.Stop()
		for n := 0; ; n++ {
			if _, err := fmt.Fprintf(w, "hostname=%s seq=%d\n", name, n); err != nil {
				return
			}
			flusher.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
			}
		}
	})
}

// gapMeter records when each line or datagram arrived and the longest silence from the start
// (the connection) to the report, between lines and at both ends.
type gapMeter struct {
	mu      sync.Mutex
	start   time.Time
	last    time.Time
	maxGap  time.Duration
	maxAt   time.Time
	got     int
	senders map[string]bool
	err     error
	// pauses are the gaps longer than pauseReported, as intervals, so a scenario can tell the
	// stalls every stream saw at once (the VM descheduled) from the ones of one path.
	pauses []pause
}

type pause struct{ from, to time.Time }

// pauseReported is 2.5 intervals: a line a little late is no pause.
const pauseReported = 250 * time.Millisecond

func newGapMeter() *gapMeter {
	now := time.Now()
	return &gapMeter{start: now, last: now, senders: map[string]bool{}}
}

func (m *gapMeter) arrived(sender string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	// From the connection's start for the first line: a stream that waits
	// to begin is as silent as one that stops.
	m.gap(now)
	m.got++
	m.last = now
	m.senders[sender] = true
}

// gap records the pause from the last arrival to now; the caller holds mu.
func (m *gapMeter) gap(now time.Time) {
	gap := now.Sub(m.last)
	if gap > m.maxGap {
		m.maxGap, m.maxAt = gap, m.last
	}
	if gap > pauseReported {
		m.pauses = append(m.pauses, pause{m.last, now})
	}
}

func (m *gapMeter) failed(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err == nil {
		m.err = err
	}
}

// report is one line the scenarios parse. The pause from the last arrival to the end counts as a
// gap too: a connection that silently stopped must not look smooth.
func (m *gapMeter) report() (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if m.err == nil {
		m.gap(now)
	}
	senders := make([]string, 0, len(m.senders))
	for s := range m.senders {
		senders = append(senders, s)
	}
	errText := "none"
	if m.err != nil {
		errText = strings.ReplaceAll(m.err.Error(), " ", "_")
	}
	pauses := make([]string, 0, len(m.pauses))
	for _, p := range m.pauses {
		pauses = append(pauses, fmt.Sprintf("%.3f-%.3f", unixSeconds(p.from), unixSeconds(p.to)))
	}
	return fmt.Sprintf("received=%d max_gap=%.3f max_gap_at=%s seconds=%.1f senders=%s error=%s pauses=%s",
		m.got, m.maxGap.Seconds(), m.maxAt.UTC().Format("15:04:05.000"), now.Sub(m.start).Seconds(),
		strings.Join(senders, ","), errText, strings.Join(pauses, ",")), m.err == nil
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// measureStream is the client side: "tcp" opens one HTTP connection to ADDR's /stream, "udp" sends
// a datagram per interval from one source port to ADDR; both count the arrivals until SIGTERM or
// SIGINT, then print the report and exit 1 if the connection failed (reset, closed, refused).
func measureStream(proto, addr string) {
	m := newGapMeter()
	var err error
	switch proto {
	case "tcp":
		err = measureTCP(addr, m)
	case "udp":
		err = measureUDP(addr, m)
	default:
		err = fmt.Errorf("-measure %q: want tcp or udp", proto)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "echoserver: %v\n", err)
		os.Exit(2)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	line, ok := m.report()
	fmt.Println(line)
	if !ok {
		os.Exit(1)
	}
}

func measureTCP(addr string, m *gapMeter) error {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return fmt.Errorf("connect %s: %w", addr, err)
	}
	if _, err := fmt.Fprintf(conn, "GET /stream HTTP/1.1\r\nHost: %s\r\n\r\n", addr); err != nil {
		return fmt.Errorf("request %s: %w", addr, err)
	}
	fmt.Printf("connected local=%s remote=%s\n", conn.LocalAddr(), conn.RemoteAddr())
	go func() {
		r := bufio.NewReader(conn)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = errors.New("closed by the peer")
				}
				m.failed(err)
				return
			}
			if i := strings.Index(line, "hostname="); i >= 0 {
				m.arrived(strings.Fields(line[i+len("hostname="):])[0])
			}
		}
	}()
	return nil
}

func measureUDP(addr string, m *gapMeter) error {
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return err
	}
	conn, err := net.DialUDP("udp", nil, raddr)
	if err != nil {
		return fmt.Errorf("connect %s: %w", addr, err)
	}
	fmt.Printf("connected local=%s remote=%s\n", conn.LocalAddr(), conn.RemoteAddr())
	go func() {
		for n := 0; ; n++ {
			// A refused datagram (ICMP port unreachable) shows up on the next read; sending goes on.
			conn.Write([]byte(fmt.Sprintf("seq=%d", n)))
			time.Sleep(streamInterval)
		}
	}()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				// Not fatal for a datagram stream: the gap shows what it cost.
				continue
			}
			sender := "unknown"
			for _, l := range strings.Split(string(buf[:n]), "\n") {
				if v, ok := strings.CutPrefix(l, "hostname="); ok {
					sender = v
				}
			}
			m.arrived(sender)
		}
	}()
	return nil
}
