// Package listeners reads which addresses and ports processes of the host
// take traffic on: TCP sockets in LISTEN and bound UDP sockets, connected or
// not, over the kernel's sock_diag netlink interface (as `ss -ltun` and
// `ss -un` show them), and SCTP sockets in LISTEN from /proc/net/sctp/eps
// (asking sock_diag would load the sctp modules on a node without them).
//
// The proxier uses it to never put a Service in front of a port the node
// itself serves (sshd, the kubelet, the API server, its own health and
// metrics ports, a resolver's query waiting for its reply). It only reads;
// it never opens, closes or changes a socket. Fake holds a fixed list.
package listeners
