package ipset

import (
	"encoding/binary"
	"errors"
	"syscall"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// rawSocket sends the two ipset requests that github.com/vishvananda/netlink
// v1.3.1 cannot express correctly:
//
//   - destroy with NLM_F_EXCL. The library's IpsetDestroy omits the flag, and
//     without it the kernel treats the request like `ipset -exist destroy`
//     and answers success for a set that does not exist
//     (net/netfilter/ipset/ip_set_core.c, ip_set_destroy, flag_exist).
//   - add/delete on bitmap:port. The library sends IPSET_ATTR_PROTO with
//     every port (tcp when unset) and bitmap:port refuses that attribute with
//     IPSET_ERR_PROTOCOL; the ipset tool sends the port alone.
type rawSocket struct {
	sockets map[int]*nl.SocketHandle
}

func openRawSocket(ns netns.NsHandle) (*rawSocket, error) {
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, err
	}
	return &rawSocket{sockets: map[int]*nl.SocketHandle{unix.NETLINK_NETFILTER: {Socket: s}}}, nil
}

func (r *rawSocket) close() {
	for _, sh := range r.sockets {
		sh.Close()
	}
}

// destroy destroys a set, failing with ENOENT when it does not exist.
func (r *rawSocket) destroy(name string) error {
	req := r.request(nl.IPSET_CMD_DESTROY, unix.NLM_F_EXCL)
	req.AddData(nl.NewRtAttr(nl.IPSET_ATTR_SETNAME, nl.ZeroTerminated(name)))
	return execute(req)
}

// port adds (IPSET_CMD_ADD) or deletes (IPSET_CMD_DEL) one port of a
// bitmap:port set; NLM_F_EXCL makes a duplicate or missing port an error.
func (r *rawSocket) port(cmd int, name string, port uint16) error {
	req := r.request(cmd, unix.NLM_F_EXCL)
	req.AddData(nl.NewRtAttr(nl.IPSET_ATTR_SETNAME, nl.ZeroTerminated(name)))
	data := nl.NewRtAttr(nl.IPSET_ATTR_DATA|int(nl.NLA_F_NESTED), nil)
	buf := binary.BigEndian.AppendUint16(nil, port)
	data.AddChild(nl.NewRtAttr(nl.IPSET_ATTR_PORT|int(nl.NLA_F_NET_BYTEORDER), buf))
	req.AddData(data)
	return execute(req)
}

// request starts an ipset request as the library does: nfgenmsg header and
// the protocol version attribute.
func (r *rawSocket) request(cmd, flags int) *nl.NetlinkRequest {
	req := nl.NewNetlinkRequest(cmd|(unix.NFNL_SUBSYS_IPSET<<8), nl.GetIpsetFlags(cmd)|flags)
	req.Sockets = r.sockets
	req.AddData(&nl.Nfgenmsg{NfgenFamily: unix.AF_NETLINK, Version: nl.NFNETLINK_V0})
	req.AddData(nl.NewRtAttr(nl.IPSET_ATTR_PROTOCOL, nl.Uint8Attr(nl.IPSET_PROTOCOL)))
	return req
}

// execute sends req; the answer's error as ipsetError makes it.
func execute(req *nl.NetlinkRequest) error {
	_, err := req.Execute(unix.NETLINK_NETFILTER, 0)
	return ipsetError(err)
}

// ipsetError turns ipset's private error numbers (4096 and up) into
// nl.IPSetError, as the library does, for mapError; other errors pass.
func ipsetError(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) && int(errno) >= nl.IPSET_ERR_PRIVATE {
		return nl.IPSetError(errno)
	}
	return err
}
