package nftables

import (
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Kernel is the nftables of a network namespace. Each call opens its own
// netlink socket, so no reply of an earlier call can be read by a later one.
type Kernel struct {
	ns netns.NsHandle
}

var _ Interface = (*Kernel)(nil)

// New works in the caller's network namespace.
func New() *Kernel { return &Kernel{ns: netns.None()} }

// NewInNamespace works in network namespace ns (kept open by the caller).
func NewInNamespace(ns netns.NsHandle) *Kernel { return &Kernel{ns: ns} }

// nfproto is the nfgenmsg family of a Family.
var nfproto = map[Family]uint8{IPv4: unix.NFPROTO_IPV4, IPv6: unix.NFPROTO_IPV6}

// DeleteTable sends NFT_MSG_DELTABLE inside a batch (the kernel takes
// nftables changes only as batches, as `nft delete table` sends them) and
// waits for the kernel's acknowledgement.
func (k *Kernel) DeleteTable(family Family, name string) error {
	proto, ok := nfproto[family]
	if !ok {
		return fmt.Errorf("delete table %s %s: unknown family", family, name)
	}
	cfg := &netlink.Config{}
	if k.ns != netns.None() {
		cfg.NetNS = int(k.ns)
	}
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, cfg)
	if err != nil {
		return fmt.Errorf("delete table %s %s: open netfilter netlink socket: %w", family, name, mapError(err))
	}
	defer conn.Close()

	ae := netlink.NewAttributeEncoder()
	ae.String(unix.NFTA_TABLE_NAME, name)
	attrs, err := ae.Encode()
	if err != nil {
		return fmt.Errorf("delete table %s %s: %w", family, name, err)
	}
	// The batch messages carry the subsystem in nfgenmsg's res_id (big
	// endian); the delete carries the family.
	batch := []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, unix.NFNL_SUBSYS_NFTABLES}
	msgs := []netlink.Message{
		{Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_MSG_BATCH_BEGIN), Flags: netlink.Request}, Data: batch},
		{
			Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_DELTABLE), Flags: netlink.Request | netlink.Acknowledge},
			Data:   append([]byte{proto, unix.NFNETLINK_V0, 0, 0}, attrs...),
		},
		{Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_MSG_BATCH_END), Flags: netlink.Request}, Data: batch},
	}
	if _, err := conn.SendMessages(msgs); err != nil {
		return fmt.Errorf("delete table %s %s: %w", family, name, mapError(err))
	}
	// One reply: the delete's acknowledgement, or the error of the first
	// message the kernel refused.
	if _, err := conn.Receive(); err != nil {
		return fmt.Errorf("delete table %s %s: %w", family, name, mapError(err))
	}
	return nil
}

// mapError turns the kernel's answers into this package's errors.
func mapError(err error) error {
	switch {
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%w (%v)", ErrNotFound, err)
	case errors.Is(err, unix.EPROTONOSUPPORT), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EAFNOSUPPORT):
		return fmt.Errorf("%w (%v)", ErrUnsupported, err)
	}
	return err
}
