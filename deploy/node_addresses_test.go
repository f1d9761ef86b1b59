package deploy

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

const (
	nodeAddressesNamespace = "ipvsproxy-node-addresses"
	nodeAddressesPublisher = "ipvsproxy-node-addresses"
)

// The base runs the Node address publisher, with exactly the rules
// docs/rbac.md gives it (the slices' rights in their own namespace only), and
// turns the daemons to the published slices of that namespace, in every
// kustomization but node-watch (kubeadm's, which drops the ConfigMap,
// included); node-watch removes the publisher and has every node watch
// every Node.
func TestNodeAddressPublisher(t *testing.T) {
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			r := renderTyped(t, dir)
			env := map[string]string{}
			for _, e := range r.daemonSet.Spec.Template.Spec.Containers[0].Env {
				env[e.Name] = e.Value
			}
			if dir == "overlays/node-watch" {
				if len(r.publisher) != 0 || env["IPVSPROXY_NODE_ADDRESSES_FROM"] != "nodes" || env["IPVSPROXY_NODE_ADDRESSES_NAMESPACE"] != "" {
					t.Errorf("node-watch keeps %d publisher objects, or the daemons do not watch the Nodes: %v", len(r.publisher), env)
				}
				return
			}
			if env["IPVSPROXY_NODE_ADDRESSES_FROM"] != "endpointslices" || env["IPVSPROXY_NODE_ADDRESSES_NAMESPACE"] != nodeAddressesNamespace {
				t.Errorf("the daemons do not read the published addresses of %s: %v", nodeAddressesNamespace, env)
			}
			checkPublisher(t, r.publisher)
		})
	}
}

func checkPublisher(t *testing.T, objs map[string]any) {
	t.Helper()
	deployment, _ := objs["Deployment"].(*appsv1.Deployment)
	namespace, _ := objs["Namespace"].(*corev1.Namespace)
	if deployment == nil || namespace == nil || namespace.Name != nodeAddressesNamespace {
		t.Fatalf("no publisher Deployment, or not its namespace %s: %v", nodeAddressesNamespace, objs)
	}
	var granted []RBACRule
	where := map[RBACRule]string{}
	if role, ok := objs["ClusterRole"].(*rbacv1.ClusterRole); ok {
		rules, err := ExpandRules(role)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			granted, where[r] = append(granted, r), "cluster"
		}
	}
	if role, ok := objs["Role"].(*rbacv1.Role); ok {
		if role.Namespace != nodeAddressesNamespace {
			t.Errorf("Role %s/%s: the publisher writes in %s alone", role.Namespace, role.Name, nodeAddressesNamespace)
		}
		rules, err := ExpandRules(&rbacv1.ClusterRole{Rules: role.Rules})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			granted, where[r] = append(granted, r), role.Namespace
		}
	}
	for _, kind := range []string{"ServiceAccount", "ClusterRoleBinding", "RoleBinding"} {
		if objs[kind] == nil {
			t.Errorf("the publisher has no %s", kind)
		}
	}
	rows, err := readTable(rbacDoc, "apiGroup", "resource", "verb", "where", "reason")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[RBACRule]string{}
	for _, row := range rows {
		r := ruleOfRow(row)
		documented[r] = row["reason"]
		if where[r] != "" && where[r] != row["where"] {
			t.Errorf("%s granted in %s, documented in %s", r, where[r], row["where"])
		}
	}
	if err := CompareRBAC(granted, documented); err != nil {
		t.Error(err)
	}
	c := deployment.Spec.Template.Spec.Containers[0]
	if !slices.Equal(c.Command, []string{"/usr/local/bin/ipvsproxy", "publish-node-addresses"}) || len(c.Env) != 1 ||
		c.Env[0].Name != "IPVSPROXY_NODE_ADDRESSES_NAMESPACE" || c.Env[0].Value != nodeAddressesNamespace {
		t.Errorf("the publisher runs %v with %v", c.Command, c.Env)
	}
	sc := c.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("the publisher's security context: %+v", sc)
	}
	if deployment.Spec.Template.Spec.HostNetwork || deployment.Spec.Template.Spec.ServiceAccountName != "ipvsproxy-node-addresses" {
		t.Errorf("the publisher runs in the host's network or as another account")
	}
}
