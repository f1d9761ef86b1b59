// Package listeners reads which addresses and ports processes of the host
// listen on (TCP sockets in LISTEN, unconnected bound UDP sockets), as
// `ss -ltun` shows them, over the kernel's sock_diag netlink interface.
//
// The proxier uses it to never put a Service in front of a port the node
// itself serves (sshd, the kubelet, the API server, its own health and
// metrics ports). It only reads; it never opens, closes or changes a socket.
// Fake holds a fixed list.
package listeners
