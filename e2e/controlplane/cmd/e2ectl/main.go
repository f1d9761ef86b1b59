// Command e2ectl sets up and drives the end-to-end cluster: it makes the
// control plane's certificates and kubeconfigs, the proxier's identity, and
// stands in for the kubelet and the controllers by writing Nodes, Services
// and EndpointSlices. Scenario scripts inside the VM call it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// exitForbidden is the exit status of `access` when the API server refused.
const exitForbidden = 3

type command struct {
	usage string
	run   func(ctx context.Context, args []string) error
}

// commands is filled in init: the commands' own usage lines refer back to it.
var commands map[string]command

func init() {
	commands = map[string]command{
		"pki":                {"pki --dir DIR [--ip IP]... [--dns NAME]...", runPKI},
		"admin-kubeconfig":   {"admin-kubeconfig --pki DIR --server URL --out FILE", runAdminKubeconfig},
		"wait-ready":         {"wait-ready [--timeout 5m]", runWaitReady},
		"apply-rbac":         {"apply-rbac --dir deploy/base [--account kube-system/ipvsproxy]", runApplyRBAC},
		"proxier-kubeconfig": {"proxier-kubeconfig --server URL --out FILE [--ca FILE] [--account NS/NAME] [--ttl 24h]", runProxierKubeconfig},
		"create-nodes":       {"create-nodes [--node NAME=IP[,IPV6][@ZONE]]...  (default node1=198.51.100.1,2001:db8:1::1@zone-a with both pod CIDRs, node2=198.51.100.2,2001:db8:1::2@zone-b)", runCreateNodes},
		"apply-service":      {"apply-service FILE|-   (prints service-info)", runApplyService},
		"service-info":       {"service-info [NS/]NAME   (KEY=VALUE lines for eval)", runServiceInfo},
		"patch-etp":          {"patch-etp [NS/]NAME Local|Cluster", runPatchETP},
		"delete-service":     {"delete-service [NS/]NAME", runDeleteService},
		"set-endpoints":      {"set-endpoints [NS/]NAME [IP[@NODE[:ready|notready|terminating|terminating-notserving]][+zones=ZONE,...][+nodes=NODE,...]]...   (+: topology hints)", runSetEndpoints},
		"delete-endpoint":    {"delete-endpoint [NS/]NAME IP", runDeleteEndpoint},
		"access":             {"access VERB RESOURCE [--namespace NS]   (exit 0 allowed, 3 forbidden)", runAccess},
		"label-node":         {"label-node NODE KEY=VALUE   (kubectl label node --overwrite)", runLabelNode},
		"create-daemonset":   {"create-daemonset FILE   (create or replace)", runCreateDaemonSet},
		"patch-daemonset":    {"patch-daemonset NS/NAME FILE   (kubectl patch --patch-file, strategic merge)", runPatchDaemonSet},
		"daemonsets-for":     {"daemonsets-for NODE   (kube-system DaemonSets that would run a pod on the node)", runDaemonSetsFor},
	}
	for _, more := range []map[string]command{scaleCommands, benchPhaseCommands, serviceCIDRCommands, nodeFleetCommands} {
		for name, c := range more {
			commands[name] = c
		}
	}
}

func usage() {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(os.Stderr, "usage: e2ectl [--kubeconfig FILE] COMMAND ...  (KUBECONFIG is read when --kubeconfig is absent)")
	for _, n := range names {
		fmt.Fprintln(os.Stderr, "  e2ectl "+commands[n].usage)
	}
}

// kubeconfigPath is the global --kubeconfig.
var kubeconfigPath string

func main() {
	global := flag.NewFlagSet("e2ectl", flag.ContinueOnError)
	global.StringVar(&kubeconfigPath, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the user to act as")
	global.Usage = usage
	if err := global.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	args := global.Args()
	if len(args) == 0 {
		usage()
		os.Exit(2)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "e2ectl: unknown command %q\n", args[0])
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := cmd.run(ctx, args[1:])
	var forbidden errForbidden
	switch {
	case errors.As(err, &forbidden):
		fmt.Println(forbidden)
		os.Exit(exitForbidden)
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	case err != nil:
		fmt.Fprintf(os.Stderr, "e2ectl %s: %v\n", args[0], err)
		os.Exit(1)
	}
}

// errForbidden carries the "forbidden" verdict of `access` to main's exit code.
type errForbidden string

func (e errForbidden) Error() string { return string(e) }

// newFlags makes a subcommand's flag set whose usage line is the command's.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprintln(os.Stderr, "usage: e2ectl "+commands[name].usage); fs.PrintDefaults() }
	return fs
}

// parseArgs parses flags anywhere among the arguments (Go's flag package
// stops at the first positional one) and checks the positional count.
func parseArgs(fs *flag.FlagSet, args []string, minPos, maxPos int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) < minPos || (maxPos >= 0 && len(pos) > maxPos) {
		fs.Usage()
		return nil, flag.ErrHelp
	}
	return pos, nil
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
