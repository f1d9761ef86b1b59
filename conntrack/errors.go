package conntrack

import "errors"

// ErrUnsupported: the kernel has no conntrack netlink support (nf_conntrack_netlink).
var ErrUnsupported = errors.New("conntrack not available")
