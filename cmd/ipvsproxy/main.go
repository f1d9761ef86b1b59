// Command ipvsproxy is the node daemon that replaces kube-proxy: `run`
// programs IPVS from the API server's Services and EndpointSlices,
// `cleanup` removes everything it installed, `version` prints its version.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
	"k8s.io/klog/v2"
)

func main() {
	err := newApp().Run(os.Args)
	if errors.Is(err, errConfigChanged) {
		err = restartSelf() // returns only if the exec failed
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ipvsproxy:", explainError(err))
		os.Exit(1)
	}
}

func newApp() *cli.App {
	return &cli.App{
		Name:    "ipvsproxy",
		Usage:   "Kubernetes service proxy on IPVS, replacing kube-proxy",
		Version: version,
		Commands: []*cli.Command{
			{
				Name:         "run",
				Usage:        "run the node daemon",
				Flags:        append(append(proxierFlags(), runFlags()...), nodeLockFlags()...),
				Action:       noArguments(runAction),
				OnUsageError: explainUsageError,
			},
			{
				Name:         "cleanup",
				Usage:        "remove every virtual server, address, ipset and iptables rule ipvsproxy installed",
				Flags:        cleanupFlags(),
				Action:       noArguments(cleanupAction),
				OnUsageError: explainUsageError,
			},
			inspectCommand(),
			publishCommand(),
			{
				Name:  "version",
				Usage: "print the version, the commit, the Go version and the Kubernetes release built against",
				Action: noArguments(func(c *cli.Context) error {
					readBuildInfo().write(c.App.Writer)
					return nil
				}),
			},
		},
		Before: func(c *cli.Context) error {
			klog.SetOutput(c.App.ErrWriter)
			return nil
		},
	}
}
