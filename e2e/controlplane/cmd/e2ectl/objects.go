package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ipvsproxy/ipvsproxy/e2e/controlplane/cluster"
)

func runCreateNodes(ctx context.Context, args []string) error {
	fs := newFlags("create-nodes")
	var specs stringList
	fs.Var(&specs, "node", "NAME=IP[,IPV6][@ZONE] (repeatable)")
	if _, err := parseArgs(fs, args, 0, 0); err != nil {
		return err
	}
	nodes := cluster.DefaultNodes
	if len(specs) > 0 {
		nodes = nil
		for _, s := range specs {
			n, err := cluster.ParseNode(s)
			if err != nil {
				return err
			}
			nodes = append(nodes, n)
		}
	}
	cs, _, err := client()
	if err != nil {
		return err
	}
	if err := cluster.EnsureNodes(ctx, cs, nodes); err != nil {
		return err
	}
	for _, n := range nodes {
		ips := n.InternalIP.String()
		if n.InternalIP6 != nil {
			ips += "," + n.InternalIP6.String()
		}
		fmt.Printf("node %s %s zone=%s\n", n.Name, ips, n.Zone)
	}
	return nil
}

func runApplyService(ctx context.Context, args []string) error {
	pos, err := parseArgs(newFlags("apply-service"), args, 1, 1)
	if err != nil {
		return err
	}
	var r io.Reader = os.Stdin
	if pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	svc, err := cluster.DecodeService(r)
	if err != nil {
		return err
	}
	cs, _, err := client()
	if err != nil {
		return err
	}
	got, err := cluster.ApplyService(ctx, cs, svc)
	if err != nil {
		return err
	}
	fmt.Print(cluster.ServiceInfo(got))
	return nil
}

func runServiceInfo(ctx context.Context, args []string) error {
	ref, _, err := serviceArgs("service-info", args, 1, 1)
	if err != nil {
		return err
	}
	cs, _, err := client()
	if err != nil {
		return err
	}
	svc, err := cs.CoreV1().Services(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get service %s: %w", ref, err)
	}
	fmt.Print(cluster.ServiceInfo(svc))
	return nil
}

func runPatchETP(ctx context.Context, args []string) error {
	ref, rest, err := serviceArgs("patch-etp", args, 2, 2)
	if err != nil {
		return err
	}
	cs, _, err := client()
	if err != nil {
		return err
	}
	got, err := cluster.SetExternalTrafficPolicy(ctx, cs, ref, v1.ServiceExternalTrafficPolicy(rest[0]))
	if err != nil {
		return err
	}
	fmt.Print(cluster.ServiceInfo(got))
	return nil
}

func runDeleteService(ctx context.Context, args []string) error {
	ref, _, err := serviceArgs("delete-service", args, 1, 1)
	if err != nil {
		return err
	}
	cs, _, err := client()
	if err != nil {
		return err
	}
	// Its slices go too: no garbage collector runs to follow ownerReferences.
	if err := cluster.SetEndpoints(ctx, cs, ref, nil); err != nil {
		return err
	}
	if err := cs.CoreV1().Services(ref.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete service %s: %w", ref, err)
	}
	return nil
}

func runSetEndpoints(ctx context.Context, args []string) error {
	ref, rest, err := serviceArgs("set-endpoints", args, 1, -1)
	if err != nil {
		return err
	}
	var eps []cluster.Endpoint
	for _, s := range rest {
		ep, err := cluster.ParseEndpoint(s)
		if err != nil {
			return err
		}
		eps = append(eps, ep)
	}
	cs, _, err := client()
	if err != nil {
		return err
	}
	return cluster.SetEndpoints(ctx, cs, ref, eps)
}

func runDeleteEndpoint(ctx context.Context, args []string) error {
	ref, rest, err := serviceArgs("delete-endpoint", args, 2, 2)
	if err != nil {
		return err
	}
	ip := net.ParseIP(rest[0])
	if ip == nil {
		return fmt.Errorf("%q is not an IP address", rest[0])
	}
	cs, _, err := client()
	if err != nil {
		return err
	}
	return cluster.RemoveEndpoint(ctx, cs, ref, ip)
}

func runAccess(ctx context.Context, args []string) error {
	fs := newFlags("access")
	namespace := fs.String("namespace", metav1.NamespaceDefault, "namespace of a namespaced resource")
	pos, err := parseArgs(fs, args, 2, 2)
	if err != nil {
		return err
	}
	_, cfg, err := client()
	if err != nil {
		return err
	}
	verdict, err := cluster.Probe(ctx, cfg, pos[0], pos[1], *namespace)
	if err != nil {
		return err
	}
	line := fmt.Sprintf("%s %s: %s", pos[0], pos[1], verdict)
	if verdict == cluster.Forbidden {
		return errForbidden(line)
	}
	fmt.Println(line)
	return nil
}

// serviceArgs parses a command whose first positional argument is a Service.
func serviceArgs(name string, args []string, minPos, maxPos int) (cluster.ServiceRef, []string, error) {
	pos, err := parseArgs(newFlags(name), args, minPos, maxPos)
	if err != nil {
		return cluster.ServiceRef{}, nil, err
	}
	ref, err := cluster.ParseServiceRef(pos[0])
	return ref, pos[1:], err
}
