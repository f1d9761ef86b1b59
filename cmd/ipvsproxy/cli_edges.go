package main

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/urfave/cli/v2"
)

// noArguments refuses positional arguments. The flag parser stops at the
// first one, so `ipvsproxy run foo --v=2` would otherwise run with every
// flag after foo silently ignored.
func noArguments(action cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.Args().Len() > 0 {
			return fmt.Errorf("%s: unexpected argument %q: %s takes only flags, and a flag after an argument is not read (ipvsproxy %s --help)",
				c.Command.Name, c.Args().First(), c.Command.Name, c.Command.Name)
		}
		return action(c)
	}
}

// invalidDuration matches the flag package's error for a duration flag.
var invalidDuration = regexp.MustCompile(`invalid value "([^"]*)" for flag -([a-z0-9-]+): parse error`)

// explainUsageError rewrites the flag package's terse errors: a duration
// without a unit ("--ipvs-sync-period=30") says what to write.
func explainUsageError(c *cli.Context, err error, _ bool) error {
	if m := invalidDuration.FindStringSubmatch(err.Error()); m != nil {
		if _, numErr := strconv.ParseFloat(m[1], 64); numErr == nil {
			return fmt.Errorf("--%s=%s: a duration needs a unit, use %ss (or ms, m, h)", m[2], m[1], m[1])
		}
		return fmt.Errorf("--%s=%s: not a duration, use e.g. 30s, 500ms or 1h", m[2], m[1])
	}
	return err
}

// cleanupFlags are the flags `cleanup` reads: what decides ownership of
// kernel objects (excluded CIDRs, the NodePort range), where sysctls live,
// logging and --config. It cleans both families whatever --ip-families says.
func cleanupFlags() []cli.Flag {
	read := []string{"config", "v", "sysctl-root", "ipvs-exclude-cidrs", "service-node-port-range"}
	var out []cli.Flag
	for _, f := range proxierFlags() {
		if slices.Contains(read, f.Names()[0]) {
			out = append(out, f)
		}
	}
	out = append(out, nodeLockFlags()...)
	out = append(out, &cli.BoolFlag{Name: "after-kube-proxy-ipvs", EnvVars: envOf("after-kube-proxy-ipvs"), Usage: "the last step of a rollback to kube-proxy's IPVS mode, once kube-proxy serves the node: remove only what kube-proxy does not take over (the mangle OUTPUT filter, ipvsproxy's own sets with its ownership record, the Service CIDR routes on kube-ipvs0) and keep the virtual servers and kube-ipvs0, now kube-proxy's; refused, changing nothing, while ipvsproxy's rules are still in place"})
	return append(out, &cli.BoolFlag{Name: "kube-proxy-leftovers", EnvVars: envOf("kube-proxy-leftovers"), Usage: "remove only what kube-proxy's iptables, ipvs and nftables modes left that ipvsproxy does not use (its KUBE-SVC-* chains, KUBE-EXTERNAL-SERVICES, KUBE-PROXY-FIREWALL, its sets and the rules matching them, its nftables tables); ipvsproxy's own state stays, so it is safe before every start (the DaemonSet's init container)"})
}

// missingUnit is time.ParseDuration's error for "30", from an environment
// variable or a file.
var missingUnit = regexp.MustCompile(`missing unit in duration "([0-9.]+)"`)

// explainError adds what to write to errors whose fix is not obvious.
func explainError(err error) error {
	if m := missingUnit.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("%w: a duration needs a unit, use %ss", err, m[1])
	}
	return err
}
