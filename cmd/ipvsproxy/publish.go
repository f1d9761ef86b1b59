package main

import (
	"errors"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/kubeapi"
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/nodeaddresses"
	"github.com/urfave/cli/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// publishCommand is `ipvsproxy publish-node-addresses`: one process of the
// cluster (a Deployment of one replica) watches every Node and publishes
// their addresses in EndpointSlices of its namespace, which change only
// when an address does; the daemons, run with
// --node-addresses-from=endpointslices, read those instead of each
// watching every Node (internal/daemon/nodeaddresses).
func publishCommand() *cli.Command {
	return &cli.Command{
		Name:  "publish-node-addresses",
		Usage: "publish every Node's addresses for the daemons' address guard (run once per cluster)",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "namespace", EnvVars: envOf("node-addresses-namespace"), Value: defaultNodeAddressesNamespace, Usage: "the namespace the slices are written in (the daemons' --node-addresses-namespace)"},
		}, flagsNamed(append(proxierFlags(), runFlags()...), "kubeconfig", "v", "vmodule", "logging-format", "log-flush-frequency",
			"kube-api-qps", "kube-api-burst", "kube-api-content-type", "kube-api-accept-content-types")...),
		Action:       noArguments(publishAction),
		OnUsageError: explainUsageError,
	}
}

func publishAction(c *cli.Context) error {
	if err := applyLogging(c); err != nil {
		return err
	}
	applyGCPercent(os.LookupEnv)
	var (
		cfg *rest.Config
		err error
	)
	if path := c.String("kubeconfig"); path == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
	}
	if err != nil {
		return err
	}
	cfg.UserAgent = "ipvsproxy-publish-node-addresses/" + version
	_, informers, _, err := newClients(c.String("kubeconfig"), clientConnection(c))
	if err != nil {
		return err
	}
	writer, err := kubeapi.NewSliceWriter(cfg)
	if err != nil {
		return err
	}
	namespace := c.String("namespace")
	if namespace == "" {
		return errors.New("--namespace is empty")
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	p := nodeaddresses.New(namespace, writer)
	nodes := newInformer(informers, informers.Nodes(), &v1.Node{}, nil, keepNodeAddresses)
	if _, err := nodes.AddEventHandler(p.Handler()); err != nil {
		return err
	}
	go nodes.RunWithContext(ctx)
	klog.InfoS("Publishing the Nodes' addresses", "namespace", namespace)
	p.Run(ctx, nodes.HasSynced)
	return nil
}

// flagsNamed are the flags of all with these names, in all's order.
func flagsNamed(all []cli.Flag, names ...string) []cli.Flag {
	var out []cli.Flag
	for _, f := range all {
		if slices.Contains(names, f.Names()[0]) {
			out = append(out, f)
		}
	}
	return out
}
