package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ipvsproxy/ipvsproxy/e2e/controlplane/cluster"
	"github.com/ipvsproxy/ipvsproxy/e2e/controlplane/pki"
)

func runPKI(_ context.Context, args []string) error {
	fs := newFlags("pki")
	dir := fs.String("dir", "", "directory to write the certificates and keys into")
	var ips, names stringList
	fs.Var(&ips, "ip", "IP address the serving certificate is valid for (repeatable)")
	fs.Var(&names, "dns", "DNS name the serving certificate is valid for (repeatable)")
	if _, err := parseArgs(fs, args, 0, 0); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("--dir is required")
	}
	opts := pki.Options{ServingDNSNames: names}
	for _, s := range ips {
		ip := net.ParseIP(s)
		if ip == nil {
			return fmt.Errorf("--ip %q is not an IP address", s)
		}
		opts.ServingIPs = append(opts.ServingIPs, ip)
	}
	return pki.Generate(*dir, opts)
}

func runAdminKubeconfig(_ context.Context, args []string) error {
	fs := newFlags("admin-kubeconfig")
	dir := fs.String("pki", "", "directory written by `e2ectl pki`")
	server := fs.String("server", "https://127.0.0.1:6443", "API server URL")
	out := fs.String("out", "", "kubeconfig file to write")
	if _, err := parseArgs(fs, args, 0, 0); err != nil {
		return err
	}
	if *dir == "" || *out == "" {
		return fmt.Errorf("--pki and --out are required")
	}
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(*dir, name)) }
	ca, err := read(pki.CAFile)
	if err != nil {
		return err
	}
	cert, err := read(pki.AdminCertFile)
	if err != nil {
		return err
	}
	key, err := read(pki.AdminKeyFile)
	if err != nil {
		return err
	}
	return cluster.WriteKubeconfig(*out, *server, ca, pki.AdminUser, cluster.Credentials{ClientCertPEM: cert, ClientKeyPEM: key})
}

// runWaitReady polls /readyz until it answers ok, then prints how long it took.
func runWaitReady(ctx context.Context, args []string) error {
	fs := newFlags("wait-ready")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	if _, err := parseArgs(fs, args, 0, 0); err != nil {
		return err
	}
	cs, _, err := client()
	if err != nil {
		return err
	}
	start := time.Now()
	var last string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, *timeout, true, func(ctx context.Context) (bool, error) {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		return strings.TrimSpace(string(body)) == "ok", nil
	})
	if err != nil {
		return fmt.Errorf("API server not ready after %s (last answer: %s): %w", *timeout, last, err)
	}
	fmt.Printf("ready after %.1fs\n", time.Since(start).Seconds())
	return nil
}

func runApplyRBAC(ctx context.Context, args []string) error {
	fs := newFlags("apply-rbac")
	dir := fs.String("dir", "", "directory of deploy manifests (deploy/base)")
	account := fs.String("account", cluster.DefaultProxierAccount.String(), "the proxier's ServiceAccount, NS/NAME")
	if _, err := parseArgs(fs, args, 0, 0); err != nil {
		return err
	}
	acct, err := parseAccount(*account)
	if err != nil {
		return err
	}
	cs, cfg, err := client()
	if err != nil {
		return err
	}
	objs, err := cluster.ReadManifests(*dir, acct.Namespace)
	if err != nil {
		return err
	}
	objs = cluster.FilterKinds(objs, cluster.RBACKinds)
	if err := cluster.Apply(ctx, cfg, objs); err != nil {
		return err
	}
	for _, o := range objs {
		fmt.Printf("applied %s %s\n", o.GetKind(), strings.TrimPrefix(o.GetNamespace()+"/"+o.GetName(), "/"))
	}
	if err := cluster.EnsureServiceAccount(ctx, cs, acct); err != nil {
		return err
	}
	roles, err := cluster.BoundClusterRoles(ctx, cs, acct)
	if err != nil {
		return err
	}
	if len(roles) == 0 {
		return fmt.Errorf("no ClusterRoleBinding in %s binds service account %s", *dir, acct)
	}
	fmt.Printf("service account %s bound to cluster roles %s\n", acct, strings.Join(roles, ","))
	return nil
}

func runProxierKubeconfig(ctx context.Context, args []string) error {
	fs := newFlags("proxier-kubeconfig")
	server := fs.String("server", "https://192.0.2.100:6443", "API server URL as the proxier reaches it")
	out := fs.String("out", "", "kubeconfig file to write")
	caFile := fs.String("ca", "", "CA certificate (default: the one of --kubeconfig)")
	account := fs.String("account", cluster.DefaultProxierAccount.String(), "the proxier's ServiceAccount, NS/NAME")
	ttl := fs.Duration("ttl", 24*time.Hour, "token lifetime")
	if _, err := parseArgs(fs, args, 0, 0); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("--out is required")
	}
	acct, err := parseAccount(*account)
	if err != nil {
		return err
	}
	cs, cfg, err := client()
	if err != nil {
		return err
	}
	ca := cfg.CAData
	if *caFile != "" {
		if ca, err = os.ReadFile(*caFile); err != nil {
			return err
		}
	}
	token, err := cluster.MintToken(ctx, cs, acct, *ttl)
	if err != nil {
		return err
	}
	return cluster.WriteKubeconfig(*out, *server, ca, acct.Username(), cluster.Credentials{Token: token})
}

func parseAccount(s string) (cluster.ProxierAccount, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" {
		return cluster.ProxierAccount{}, fmt.Errorf("account %q: want NAMESPACE/NAME", s)
	}
	return cluster.ProxierAccount{Namespace: ns, Name: name}, nil
}

// client builds a clientset from --kubeconfig (or KUBECONFIG).
func client() (kubernetes.Interface, *rest.Config, error) {
	if kubeconfigPath == "" {
		return nil, nil, fmt.Errorf("no kubeconfig: pass --kubeconfig or set KUBECONFIG")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	if err != nil {
		return nil, nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfigPath, err)
	}
	// The API server under emulation answers slowly; the defaults (QPS 5)
	// would make scenario setup crawl for no benefit in a private cluster.
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return cs, cfg, nil
}
