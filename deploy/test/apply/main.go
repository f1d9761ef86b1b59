// Command apply server-side applies the rendered kustomizations of deploy/ to
// a real API server, with strict field validation, so that any field the
// server's schema does not know fails the run; then it checks through
// SubjectAccessReviews that the ServiceAccount is granted exactly the rules
// of docs/rbac.md and not a list of things it must never do.
//
// It is what `kubectl apply --server-side --validate=strict -k DIR` does,
// without needing kubectl. With -token-kubeconfig it also writes a kubeconfig
// holding a token of the ServiceAccount, so that the end-to-end suite runs the
// proxy with exactly the permissions users install.
//
//	go run ./deploy/test/apply -kubeconfig admin.kubeconfig deploy/base
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/ipvsproxy/ipvsproxy/deploy"
	"github.com/ipvsproxy/ipvsproxy/internal/doctable"
)

// daemonName is the daemon's ServiceAccount and ClusterRole.
const daemonName = "ipvsproxy"

// forbidden are requests the proxy must never be able to make; each one is
// a way a compromised node daemon could spread (read credentials, rewrite
// where traffic goes, or hide itself).
var forbidden = []deploy.RBACRule{
	{APIGroup: "", Resource: "secrets", Verb: "get"},
	{APIGroup: "", Resource: "secrets", Verb: "list"},
	{APIGroup: "", Resource: "configmaps", Verb: "list"},
	{APIGroup: "", Resource: "pods", Verb: "list"},
	{APIGroup: "", Resource: "services", Verb: "get"},
	{APIGroup: "", Resource: "services", Verb: "update"},
	{APIGroup: "", Resource: "services", Verb: "delete"},
	{APIGroup: "", Resource: "endpoints", Verb: "list"},
	{APIGroup: "discovery.k8s.io", Resource: "endpointslices", Verb: "create"},
	{APIGroup: "discovery.k8s.io", Resource: "endpointslices", Verb: "update"},
	{APIGroup: "", Resource: "nodes", Verb: "get"},
	{APIGroup: "", Resource: "nodes", Verb: "update"},
	{APIGroup: "", Resource: "nodes", Verb: "patch"},
	{APIGroup: "", Resource: "nodes", Verb: "delete"},
	{APIGroup: "", Resource: "events", Verb: "update"},
	{APIGroup: "", Resource: "events", Verb: "delete"},
	{APIGroup: "", Resource: "serviceaccounts", Verb: "create"},
	{APIGroup: "rbac.authorization.k8s.io", Resource: "clusterrolebindings", Verb: "create"},
	{APIGroup: "coordination.k8s.io", Resource: "leases", Verb: "create"},
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "admin kubeconfig of the cluster to apply to (required)")
	fieldManager := flag.String("field-manager", "ipvsproxy-deploy", "server-side apply field manager")
	rbacDoc := flag.String("rbac-doc", "docs/rbac.md", "the RBAC table the ServiceAccount's permissions must match; empty skips the check")
	tokenKubeconfig := flag.String("token-kubeconfig", "", "if set, write a kubeconfig with a token of the ServiceAccount here")
	tokenTTL := flag.Duration("token-ttl", 24*time.Hour, "lifetime of the token written by -token-kubeconfig")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after this long")
	installCommands := flag.String("install-commands", "", "FILE:NAME: also apply, first, what the install commands of that Markdown block name (kubectl apply --server-side -k, helm install -f), so a page's commands are the ones applied")
	image := flag.String("image", "", "a release's image (REPOSITORY@sha256:...): every container of the objects read from a .yaml file or a packaged chart (.tgz), given without a values file, must run it, as the server stored them")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: apply -kubeconfig FILE [flags] KUSTOMIZATION-DIR|CHART-DIR[=VALUES.yaml]...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *kubeconfig == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	dirs := flag.Args()
	if *installCommands != "" {
		file, name, _ := strings.Cut(*installCommands, ":")
		commands, err := doctable.Commands(file, name)
		if err == nil {
			var targets []string
			if targets, err = deploy.ApplyTargets(commands); err == nil {
				fmt.Printf("the install commands of %s: %s\n", *installCommands, strings.Join(commands, "; "))
				dirs = append(targets, dirs...)
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "apply:", err)
			os.Exit(1)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, *kubeconfig, *fieldManager, *rbacDoc, *tokenKubeconfig, *image, *tokenTTL, dirs); err != nil {
		fmt.Fprintln(os.Stderr, "apply:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, fieldManager, rbacDoc, tokenKubeconfig, image string, tokenTTL time.Duration, dirs []string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	clients, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(clients.Discovery()))

	var serviceAccount *corev1.ServiceAccount
	var role *rbacv1.ClusterRole
	for _, dir := range dirs {
		objs, err := deploy.Render(dir)
		if err != nil {
			return err
		}
		// A release's file: a rendered manifest or a packaged chart, not a chart with a values file.
		released := image != "" && !strings.Contains(dir, "=") && (strings.HasSuffix(dir, ".yaml") || strings.HasSuffix(dir, ".tgz"))
		pinned := 0
		for _, obj := range objs {
			typed, err := deploy.Decode(obj)
			if err != nil {
				return err
			}
			// The daemon's identity; the Node address publisher's is checked
			// against its table by deploy's unit tests.
			switch v := typed.(type) {
			case *corev1.ServiceAccount:
				if v.Name == daemonName {
					serviceAccount = v
				}
			case *rbacv1.ClusterRole:
				if v.Name == daemonName {
					role = v
				}
			}
			stored, err := apply(ctx, dyn, mapper, fieldManager, obj)
			if err != nil {
				return fmt.Errorf("%s: %w", dir, err)
			}
			if released {
				for _, img := range containerImages(stored.Object) {
					if img != image {
						return fmt.Errorf("%s: %s %s runs %s, want the release's %s", dir, obj.GetKind(), obj.GetName(), img, image)
					}
					pinned++
				}
			}
		}
		if released && pinned == 0 {
			return fmt.Errorf("%s: no container runs the release's image %s", dir, image)
		}
		fmt.Printf("applied %s: %d objects\n", dir, len(objs))
	}
	if serviceAccount == nil {
		return errors.New("no ServiceAccount among the applied objects")
	}
	if rbacDoc != "" {
		if err := checkAccess(ctx, clients, serviceAccount, role, rbacDoc); err != nil {
			return err
		}
	}
	if tokenKubeconfig != "" {
		if err := writeTokenKubeconfig(ctx, clients, cfg, serviceAccount, tokenTTL, tokenKubeconfig); err != nil {
			return err
		}
	}
	return nil
}

// apply sends obj as a server-side apply patch. FieldValidation Strict makes
// the server reject unknown and duplicate fields instead of dropping them,
// which a dry run would also do; the real apply additionally proves that
// admission (priority class, namespace) accepts the objects.
func apply(ctx context.Context, dyn dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, fieldManager string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvk := obj.GroupVersionKind()
	what := fmt.Sprintf("%s %s/%s", gvk.Kind, obj.GetNamespace(), obj.GetName())
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("apply %s: find its resource: %w", what, err)
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, fmt.Errorf("apply %s: %w", what, err)
	}
	var client dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == "namespace" {
		client = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	force := true
	got, err := client.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
		FieldManager:    fieldManager,
		Force:           &force,
		FieldValidation: metav1.FieldValidationStrict,
	})
	if err != nil {
		return nil, fmt.Errorf("apply %s: %w", what, err)
	}
	fmt.Printf("applied %s (resourceVersion %s)\n", what, got.GetResourceVersion())
	return got, nil
}

// containerImages are the images of every container and init container of
// a workload or a Pod.
func containerImages(obj map[string]any) []string {
	var images []string
	for _, path := range [][]string{
		{"spec", "template", "spec", "containers"}, {"spec", "template", "spec", "initContainers"},
		{"spec", "containers"}, {"spec", "initContainers"},
	} {
		list, _, _ := unstructured.NestedSlice(obj, path...)
		for _, c := range list {
			if m, ok := c.(map[string]any); ok {
				img, _ := m["image"].(string)
				images = append(images, img)
			}
		}
	}
	return images
}

// checkAccess asks the server's authorizer, as the ServiceAccount, for each
// documented rule (must be allowed) and each forbidden one (must not be).
func checkAccess(ctx context.Context, clients kubernetes.Interface, sa *corev1.ServiceAccount, role *rbacv1.ClusterRole, rbacDoc string) error {
	documented, err := deploy.DocumentedRBAC(rbacDoc)
	if err != nil {
		return err
	}
	if role != nil {
		granted, err := deploy.ExpandRules(role)
		if err != nil {
			return err
		}
		if err := deploy.CompareRBAC(granted, documented); err != nil {
			return err
		}
	}
	user := "system:serviceaccount:" + sa.Namespace + ":" + sa.Name
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.Namespace, "system:authenticated"}
	allowed := func(r deploy.RBACRule) (bool, error) {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: r.APIGroup, Resource: r.Resource, Verb: r.Verb,
			},
		}}
		got, err := clients.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("review %s for %s: %w", r, user, err)
		}
		return got.Status.Allowed, nil
	}
	var problems []error
	for r := range documented {
		ok, err := allowed(r)
		if err != nil {
			return err
		}
		if !ok {
			problems = append(problems, fmt.Errorf("%s is documented but the server denies it to %s", r, user))
		}
	}
	for _, r := range forbidden {
		ok, err := allowed(r)
		if err != nil {
			return err
		}
		if ok {
			problems = append(problems, fmt.Errorf("%s is allowed to %s; it must not be (is the API server's --authorization-mode RBAC?)", r, user))
		}
	}
	if len(problems) > 0 {
		return errors.Join(problems...)
	}
	fmt.Printf("access of %s: %d documented rules allowed, %d forbidden requests denied\n", user, len(documented), len(forbidden))
	return nil
}

// writeTokenKubeconfig writes a kubeconfig for the ServiceAccount: same
// server and CA as the admin one, a bound token from the TokenRequest API.
func writeTokenKubeconfig(ctx context.Context, clients kubernetes.Interface, admin *rest.Config, sa *corev1.ServiceAccount, ttl time.Duration, path string) error {
	seconds := int64(ttl.Seconds())
	tr, err := clients.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("request a token for ServiceAccount %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	caData := admin.CAData
	if len(caData) == 0 && admin.CAFile != "" {
		if caData, err = os.ReadFile(admin.CAFile); err != nil {
			return fmt.Errorf("read CA of the admin kubeconfig: %w", err)
		}
	}
	name := sa.Namespace + "-" + sa.Name
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"cluster": {Server: admin.Host, CertificateAuthorityData: caData, InsecureSkipTLSVerify: admin.Insecure}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{name: {Token: tr.Status.Token}},
		Contexts:       map[string]*clientcmdapi.Context{name: {Cluster: "cluster", AuthInfo: name}},
		CurrentContext: name,
	}
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		return fmt.Errorf("write ServiceAccount kubeconfig %s: %w", path, err)
	}
	fmt.Printf("wrote %s: token of %s/%s, valid until %s\n", path, sa.Namespace, sa.Name, tr.Status.ExpirationTimestamp.UTC().Format(time.RFC3339))
	return nil
}
