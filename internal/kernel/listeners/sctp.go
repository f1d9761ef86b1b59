package listeners

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/nsthread"
	"github.com/vishvananda/netns"
)

// SCTP listeners come from /proc/net/sctp/eps, not from sock_diag: asking
// sock_diag for IPPROTO_SCTP makes the kernel load sctp_diag, and with it
// sctp, on a node that never used SCTP, which is more than reading may do.
// The file exists exactly when the sctp module is loaded; without it no SCTP
// socket can exist, and nothing is listed.

// sctpEpsPath is where the kernel lists the SCTP endpoints of the reader's
// network namespace.
const sctpEpsPath = "/proc/self/net/sctp/eps"

// sctpListening lists the SCTP sockets in LISTEN of the table's namespace.
func (t Table) sctpListening() ([]Listener, error) {
	var text []byte
	var err error
	if t.nsFD == 0 {
		text, err = os.ReadFile(sctpEpsPath)
	} else {
		// /proc/thread-self/net is the namespace of the thread that opens
		// it: one set into the table's namespace.
		if e := nsthread.Do(netns.NsHandle(t.nsFD), func() { text, err = os.ReadFile("/proc/thread-self/net/sctp/eps") }); e != nil {
			return nil, fmt.Errorf("list SCTP listeners: %w", e)
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // no sctp module, so no SCTP socket
	}
	if err != nil {
		return nil, fmt.Errorf("list SCTP listeners: %w", err)
	}
	out, err := parseSCTPEndpoints(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("list SCTP listeners: %w", err)
	}
	return out, nil
}

// parseSCTPEndpoints reads /proc/net/sctp/eps (net/sctp/proc.c,
// sctp_eps_seq_show): a header, then per endpoint
//
//	ENDPT SOCK STY SST HBKT LPORT UID INODE LADDRS...
//
// SST is the socket's state (10, SCTP_SS_LISTENING, for a listener), LPORT
// its port, LADDRS every address it is bound to (0.0.0.0 or :: for all).
func parseSCTPEndpoints(r io.Reader) ([]Listener, error) {
	var out []Listener
	sc := bufio.NewScanner(r)
	header := true
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if header {
			header = false
			if len(f) > 0 && f[0] == "ENDPT" {
				continue
			}
		}
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("endpoint line %q: want at least 8 fields", sc.Text())
		}
		state, err := strconv.Atoi(f[3])
		if err != nil {
			return nil, fmt.Errorf("endpoint line %q: state: %w", sc.Text(), err)
		}
		port, err := strconv.ParseUint(f[5], 10, 16)
		if err != nil {
			return nil, fmt.Errorf("endpoint line %q: port: %w", sc.Text(), err)
		}
		if state != tcpListen || port == 0 {
			continue
		}
		for _, text := range f[8:] {
			// IPv6 in %pI6's uncompressed form; "*" marks an association's
			// primary path, which an endpoint line has none of.
			a, err := netip.ParseAddr(strings.TrimPrefix(text, "*"))
			if err != nil {
				return nil, fmt.Errorf("endpoint line %q: address: %w", sc.Text(), err)
			}
			out = append(out, Listener{Protocol: SCTP, Addr: a.Unmap().WithZone(""), Port: uint16(port)})
		}
	}
	return out, sc.Err()
}
