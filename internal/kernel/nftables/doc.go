// Package nftables deletes nftables tables by name, over netlink
// (NFNL_SUBSYS_NFTABLES), without the nft binary. ipvsproxy writes no
// nftables of its own: the one use is removing the tables kube-proxy's
// nftables mode leaves (`ip kube-proxy`, `ip6 kube-proxy`). It never
// touches a table it is not named.
package nftables
