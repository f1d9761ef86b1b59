package conntrack

import (
	"fmt"
	"strconv"
)

// String renders the flow as one line, e.g.
// "udp 192.0.2.1:40001 -> 198.51.100.10:80 reply 192.0.2.2:8080 -> 192.0.2.1:40001".
func (f Flow) String() string {
	return fmt.Sprintf("%s %s -> %s reply %s -> %s", protocolName(f.Protocol), f.OrigSrc, f.OrigDst, f.ReplySrc, f.ReplyDst)
}

func protocolName(p uint8) string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	case SCTP:
		return "sctp"
	}
	return "proto" + strconv.Itoa(int(p))
}
