package iptables

import "errors"

var (
	// ErrNotFound: the chain does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: iptables-restore rejected the input (syntax, unknown
	// target, a referenced chain deleted).
	ErrInvalid = errors.New("invalid rules")
	// ErrUnsupported: no usable iptables binary or kernel support.
	ErrUnsupported = errors.New("iptables not available")
)
