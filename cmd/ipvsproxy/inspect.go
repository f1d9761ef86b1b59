package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/inspect"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/urfave/cli/v2"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// `ipvsproxy inspect`: the kernel's view named by Service, --check, trace
// and conntrack. It only reads: the kernel through the adapters' read side,
// the names from the daemon's read-only endpoint or the API server.

func inspectCommand() *cli.Command {
	return &cli.Command{
		Name:  "inspect",
		Usage: "show what the kernel holds (IPVS, kube-ipvs0, KUBE-* ipsets, conntrack) named by Kubernetes Service",
		Description: "Names come from the daemon on this node (--daemon, its --metrics-bind-address), or with --kubeconfig\n" +
			"from the API server; with neither the kernel view is shown unnamed.\n" +
			"--check exits 0 when the kernel agrees with what the proxier would program now, 1 when it differs, 2 on error.",
		Flags:  inspectFlags(),
		Action: inspectAction,
		Subcommands: []*cli.Command{
			{
				Name:      "trace",
				Usage:     "trace a packet from SRC to DST:PORT[/PROTO] through the proxier's rules and virtual servers",
				ArgsUsage: "SRC DST:PORT[/tcp|udp|sctp]",
				Flags:     inspectFlags(),
				Action:    inspectTraceAction,
			},
			{
				Name:   "conntrack",
				Usage:  "list the conntrack flows of the virtual servers (of one Service with --service)",
				Flags:  inspectFlags(),
				Action: inspectConntrackAction,
			},
		},
	}
}

func inspectFlags() []cli.Flag {
	return append(proxierFlags(),
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: inspect.FormatTable, Usage: "table, json or yaml (schema " + inspect.APIVersion + ", docs/inspect.md)"},
		&cli.StringFlag{Name: "service", Usage: "only the virtual servers of this Service (NAMESPACE/NAME)"},
		&cli.StringFlag{Name: "vip", Usage: "only the virtual servers of this address (ADDR or ADDR:PORT)"},
		&cli.BoolFlag{Name: "check", Usage: "compare the kernel with the desired state; exit 0 agree, 1 differ, 2 error"},
		&cli.BoolFlag{Name: "watch", Aliases: []string{"w"}, Usage: "redraw every --interval with connection rates"},
		&cli.DurationFlag{Name: "interval", Value: 2 * time.Second, Usage: "redraw period of --watch"},
		&cli.BoolFlag{Name: "stats", Usage: "add IPVS packet and byte counters to the table"},
		&cli.StringFlag{Name: "daemon", EnvVars: envOf("inspect-bind-address"), Usage: "the daemon's --inspect-bind-address, where its read-only inspect endpoint is; empty: 127.0.0.1 on the port of $IPVSPROXY_METRICS_BIND_ADDRESS (10249 when unset), as the daemon's default"},
		&cli.StringFlag{Name: "kubeconfig", Usage: "name objects from the API server instead of the daemon (with the proxier flags of the daemon)"},
		&cli.StringFlag{Name: "hostname-override", EnvVars: envOf("hostname-override"), Usage: "this node's name, if not the host name (with --kubeconfig)"},
	)
}

// daemonAddress is where the daemon's inspect endpoint is: --daemon (or the
// daemon's own $IPVSPROXY_INSPECT_BIND_ADDRESS, in its container), else the
// daemon's default, loopback on the metrics port.
func daemonAddress(c *cli.Context) string {
	if a := c.String("daemon"); a != "" {
		return a
	}
	return inspectBindAddress("", os.Getenv(envOf("metrics-bind-address")[0]))
}

// inspectEnv is what every inspect subcommand opens.
type inspectEnv struct {
	kernel    inspect.Kernel
	close     func()
	snapshot  *snapshot.Snapshot
	namesFrom string
	warnings  []string
}

// openInspect opens the kernel readers and finds the names. Neither failing
// is fatal: the view says what it could not read.
func openInspect(c *cli.Context) (*inspectEnv, error) {
	if err := inspect.CheckFormat(c.String("output")); err != nil {
		return nil, err
	}
	env := &inspectEnv{}
	env.kernel, env.close = openKernelReaders()
	if kubeconfig := c.String("kubeconfig"); kubeconfig != "" {
		snap, err := snapshotFromAPIServer(c, env.kernel)
		if err != nil {
			return nil, err
		}
		env.snapshot, env.namesFrom = &snap, "api-server"
		return env, nil
	}
	snap, url, err := inspect.FetchSnapshot(c.Context, daemonAddress(c))
	if err != nil {
		env.warnings = append(env.warnings, err.Error()+"; showing the kernel unnamed")
		return env, nil
	}
	env.snapshot, env.namesFrom = &snap, "daemon "+url
	return env, nil
}

// openKernelReaders opens the read side of each adapter; one that cannot be
// opened is a warning.
func openKernelReaders() (inspect.Kernel, func()) {
	var k inspect.Kernel
	var closers []func()
	if h, err := ipvs.New(); err != nil {
		k.Warnings = append(k.Warnings, inspect.Explain("open IPVS", err).Error())
	} else {
		closers = append(closers, func() { h.Close() })
		if r, ok := h.(inspect.IPVSReader); ok {
			k.IPVS = r
		}
	}
	if n, err := netif.New(owned.DummyInterface); err != nil {
		k.Warnings = append(k.Warnings, inspect.Explain("open rtnetlink", err).Error())
	} else {
		k.Addresses = n
	}
	if s, err := ipset.New(); err != nil {
		k.Warnings = append(k.Warnings, inspect.Explain("open ipset", err).Error())
	} else {
		k.Sets = s
	}
	if ct, err := conntrack.New(); err != nil {
		k.Warnings = append(k.Warnings, inspect.Explain("open conntrack", err).Error())
	} else {
		k.Flows = ct
		closers = append(closers, func() { ct.Close() })
	}
	return k, func() {
		for _, c := range closers {
			c()
		}
	}
}

// snapshotFromAPIServer lists the objects and computes the desired state
// with the proxier's own code (inspect.SnapshotFromObjects).
func snapshotFromAPIServer(c *cli.Context, k inspect.Kernel) (snapshot.Snapshot, error) {
	cfg, err := configFromFlags(c)
	if err != nil {
		return snapshot.Snapshot{}, err
	}
	if cfg.Families, err = resolveFamiliesOffline(c.String("ip-families")); err != nil {
		return snapshot.Snapshot{}, err
	}
	nodeName, err := nodeNameOf(c.String("hostname-override"))
	if err != nil {
		return snapshot.Snapshot{}, err
	}
	client, err := newClient(c.String("kubeconfig"))
	if err != nil {
		return snapshot.Snapshot{}, err
	}
	var host []netip.Addr
	if k.Addresses != nil {
		if host, err = k.Addresses.HostAddresses(); err != nil {
			return snapshot.Snapshot{}, inspect.Explain("list the node's addresses", err)
		}
	}
	ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
	defer cancel()
	// What the daemon's informers watch.
	svcs, err := client.Services().List(ctx, serviceListOptions())
	if err != nil {
		return snapshot.Snapshot{}, fmt.Errorf("list Services from the API server: %w", err)
	}
	slices, err := client.EndpointSlices().List(ctx, endpointSliceListOptions())
	if err != nil {
		return snapshot.Snapshot{}, fmt.Errorf("list EndpointSlices from the API server: %w", err)
	}
	node, err := client.Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		node = nil // the zone only narrows topology hints; go on without it
	}
	services := make([]*v1.Service, 0, len(svcs.Items))
	for i := range svcs.Items {
		services = append(services, &svcs.Items[i])
	}
	endpointSlices := make([]*discovery.EndpointSlice, 0, len(slices.Items))
	for i := range slices.Items {
		endpointSlices = append(endpointSlices, &slices.Items[i])
	}
	return inspect.SnapshotFromObjects(cfg, nodeName, node, host, services, endpointSlices)
}

func inspectAction(c *cli.Context) error {
	if c.Args().Len() > 0 {
		return fmt.Errorf("unknown inspect command %q: use trace or conntrack", c.Args().First())
	}
	env, err := openInspect(c)
	if err != nil {
		return exitCode(c, err)
	}
	defer env.close()
	if c.Bool("check") {
		return inspectCheck(c, env)
	}
	if c.Bool("watch") {
		return inspectWatch(c, env)
	}
	r, err := env.report(c)
	if err != nil {
		return err
	}
	return writeReport(c.App.Writer, c, r, nil)
}

// exitCode makes an error exit 2 under --check (1 is "differ").
func exitCode(c *cli.Context, err error) error {
	if c.Bool("check") {
		return cli.Exit("ipvsproxy inspect --check: "+err.Error(), inspect.CheckError)
	}
	return err
}

func (env *inspectEnv) report(c *cli.Context) (inspect.Report, error) {
	k, err := inspect.ReadKernel(env.kernel)
	if err != nil {
		return inspect.Report{}, err
	}
	k.Warnings = append(env.warnings, k.Warnings...)
	r := inspect.NewReport(k, env.snapshot, env.namesFrom, time.Now())
	if env.namesFrom == "api-server" {
		r.Status = nil
	}
	if err := r.Filter(c.String("service"), c.String("vip")); err != nil {
		return r, err
	}
	return r, nil
}

func writeReport(w io.Writer, c *cli.Context, r inspect.Report, rates map[string]float64) error {
	if f := c.String("output"); f == inspect.FormatJSON || f == inspect.FormatYAML {
		return inspect.Encode(w, f, r)
	}
	return inspect.WriteTable(w, r, inspect.TableOptions{Stats: c.Bool("stats"), Rates: rates})
}

func inspectCheck(c *cli.Context, env *inspectEnv) error {
	if env.snapshot == nil {
		return cli.Exit("ipvsproxy inspect --check: no desired state to compare with: "+fmt.Sprint(env.warnings), inspect.CheckError)
	}
	if env.kernel.IPVS == nil {
		return cli.Exit("ipvsproxy inspect --check: "+fmt.Sprint(env.kernel.Warnings), inspect.CheckError)
	}
	// Flows play no part in the comparison: a node without conntrack
	// netlink must not fail the probe for them.
	readers := env.kernel
	readers.Flows = nil
	k, err := inspect.ReadKernel(readers)
	if err != nil {
		return cli.Exit("ipvsproxy inspect --check: "+err.Error(), inspect.CheckError)
	}
	if len(k.Warnings) > 0 {
		return cli.Exit("ipvsproxy inspect --check: the kernel could not be read whole: "+fmt.Sprint(k.Warnings), inspect.CheckError)
	}
	res := inspect.Check(k, *env.snapshot)
	if f := c.String("output"); f == inspect.FormatJSON || f == inspect.FormatYAML {
		if err := inspect.Encode(c.App.Writer, f, res); err != nil {
			return cli.Exit(err.Error(), inspect.CheckError)
		}
	} else {
		inspect.WriteCheck(c.App.Writer, res)
	}
	if code := res.ExitCode(); code != inspect.CheckAgree {
		return cli.Exit("", code)
	}
	return nil
}

// inspectWatch redraws in place until interrupted, with connection rates
// from the IPVS counters' growth between two draws.
func inspectWatch(c *cli.Context, env *inspectEnv) error {
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	table := c.String("output") == inspect.FormatTable
	var prev map[string]uint64
	var prevTime time.Time
	for {
		if env.namesFrom != "api-server" && c.String("kubeconfig") == "" {
			// The daemon's state moves: fetch it anew each time.
			if snap, url, err := inspect.FetchSnapshot(ctx, daemonAddress(c)); err == nil {
				env.snapshot, env.namesFrom, env.warnings = &snap, "daemon "+url, nil
			}
		}
		r, err := env.report(c)
		if err != nil {
			return err
		}
		now := time.Now()
		counts := inspect.ConnectionCounts(r)
		var rates map[string]float64
		if prev != nil {
			rates = inspect.Rates(prev, counts, now.Sub(prevTime))
		} else {
			rates = map[string]float64{}
		}
		prev, prevTime = counts, now
		if table {
			fmt.Fprint(c.App.Writer, "\x1b[H\x1b[2J") // home and clear: redraw in place
			fmt.Fprintf(c.App.Writer, "every %v: ipvsproxy inspect   %s\n\n", c.Duration("interval"), now.UTC().Format(time.RFC3339))
		}
		if err := writeReport(c.App.Writer, c, r, rates); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(c.Duration("interval")):
		}
	}
}

func inspectTraceAction(c *cli.Context) error {
	if c.Args().Len() != 2 {
		return fmt.Errorf("usage: ipvsproxy inspect trace SRC DST:PORT[/PROTO], e.g. 10.244.1.20 10.96.0.10:80/tcp")
	}
	pkt, err := inspect.ParsePacket(c.Args().Get(0), c.Args().Get(1))
	if err != nil {
		return err
	}
	env, err := openInspect(c)
	if err != nil {
		return err
	}
	defer env.close()
	if env.snapshot == nil {
		return fmt.Errorf("cannot trace without the desired state: %v; or give --kubeconfig", env.warnings)
	}
	var k *inspect.KernelState
	if st, err := inspect.ReadKernel(env.kernel); err == nil {
		k = &st
	}
	r := inspect.NewTraceReport(*env.snapshot, k, pkt)
	if f := c.String("output"); f == inspect.FormatJSON || f == inspect.FormatYAML {
		return inspect.Encode(c.App.Writer, f, r)
	}
	inspect.WriteTrace(c.App.Writer, r)
	return nil
}

func inspectConntrackAction(c *cli.Context) error {
	env, err := openInspect(c)
	if err != nil {
		return err
	}
	defer env.close()
	if env.kernel.Flows == nil {
		return errors.New(fmt.Sprint(env.kernel.Warnings))
	}
	r, err := env.report(c)
	if err != nil {
		return err
	}
	k, err := inspect.ReadKernel(inspect.Kernel{Flows: env.kernel.Flows})
	if err != nil {
		return err
	}
	list := inspect.ServiceFlows(r, k.Flows)
	if f := c.String("output"); f == inspect.FormatJSON || f == inspect.FormatYAML {
		return inspect.Encode(c.App.Writer, f, list)
	}
	inspect.WriteFlows(c.App.Writer, list)
	return nil
}
