package main

import (
	"fmt"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/cleanup"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/nftables"
	"github.com/urfave/cli/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

func cleanupAction(c *cli.Context) error {
	cfg, _, err := loadConfig(c)
	if err != nil {
		return err
	}
	// Clean both families: the node may have run dual-stack before. A
	// host without ip6tables has no IPv6 rules to clean.
	cfg.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	lock, err := takeNodeLock(c.Context, c)
	if err != nil {
		return err
	}
	defer lock.Release()
	k, closeKernel, err := adapters.Open(adapters.Options{Families: cfg.Families, SysctlRoot: c.String("sysctl-root"), IPVSIfPresent: true})
	if err != nil {
		klog.InfoS("Cleaning IPv4 only", "reason", err)
		cfg.Families = cfg.Families[:1]
		if k, closeKernel, err = adapters.Open(adapters.Options{Families: cfg.Families, SysctlRoot: c.String("sysctl-root"), IPVSIfPresent: true}); err != nil {
			return err
		}
	}
	defer closeKernel()
	if c.Bool("kube-proxy-leftovers") && c.Bool("after-kube-proxy-ipvs") {
		return fmt.Errorf("--kube-proxy-leftovers and --after-kube-proxy-ipvs: give one (the first removes kube-proxy's state before ipvsproxy starts, the second ipvsproxy's after kube-proxy took over)")
	}
	if c.Bool("after-kube-proxy-ipvs") {
		removed, err := cleanup.AfterKubeProxyIPVS(k, cfg.Families)
		klog.InfoS("Removed what kube-proxy's IPVS mode does not take over", "count", len(removed), "removed", removed)
		return err
	}
	if c.Bool("kube-proxy-leftovers") {
		removed, err := cleanup.KubeProxyLeftovers(k, nftables.New(), cfg.Families)
		klog.InfoS("Removed kube-proxy's leftovers", "count", len(removed), "removed", removed)
		return err
	}
	if err := cleanup.Installed(k, cfg.Families); err != nil {
		return err
	}
	klog.InfoS("Removed everything ipvsproxy installed")
	return nil
}
