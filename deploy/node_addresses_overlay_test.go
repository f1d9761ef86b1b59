package deploy

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

const nodeAddressesNamespace = "ipvsproxy-node-addresses"

// The Node address overlay adds the publisher, with exactly the rules
// docs/rbac.md gives it (the slices' rights in their own namespace only),
// and turns the daemons to the published slices of that namespace; the
// daemon's own objects stay the base's.
func TestNodeAddressesOverlay(t *testing.T) {
	objs, err := Render("overlays/node-addresses")
	if err != nil {
		t.Fatal(err)
	}
	var (
		config      *corev1.ConfigMap
		deployment  *appsv1.Deployment
		namespace   *corev1.Namespace
		granted     []RBACRule
		where       = map[RBACRule]string{}
		daemonRoles int
	)
	for _, o := range objs {
		typed, err := Decode(o)
		if err != nil {
			t.Fatal(err)
		}
		switch v := typed.(type) {
		case *corev1.ConfigMap:
			config = v
		case *appsv1.Deployment:
			deployment = v
		case *corev1.Namespace:
			namespace = v
		case *rbacv1.ClusterRole:
			if v.Name == "ipvsproxy" {
				daemonRoles++
				continue
			}
			rules, err := ExpandRules(v)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rules {
				granted, where[r] = append(granted, r), "cluster"
			}
		case *rbacv1.Role:
			if v.Namespace != nodeAddressesNamespace {
				t.Errorf("Role %s/%s: the publisher writes in %s alone", v.Namespace, v.Name, nodeAddressesNamespace)
			}
			rules, err := ExpandRules(&rbacv1.ClusterRole{Rules: v.Rules})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rules {
				granted, where[r] = append(granted, r), v.Namespace
			}
		}
	}
	if daemonRoles != 1 || config == nil || deployment == nil || namespace == nil || namespace.Name != nodeAddressesNamespace {
		t.Fatalf("the overlay lacks the daemon's ClusterRole (%d), its ConfigMap, the Deployment or the namespace", daemonRoles)
	}
	rows, err := readTable(rbacDoc, "apiGroup", "resource", "verb", "where", "reason")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[RBACRule]string{}
	for _, row := range rows {
		group := row["apiGroup"]
		if group == `""` {
			group = ""
		}
		r := RBACRule{APIGroup: group, Resource: row["resource"], Verb: row["verb"]}
		documented[r] = row["reason"]
		if where[r] != "" && where[r] != row["where"] {
			t.Errorf("%s granted in %s, documented in %s", r, where[r], row["where"])
		}
	}
	if err := CompareRBAC(granted, documented); err != nil {
		t.Error(err)
	}
	if config.Data["IPVSPROXY_NODE_ADDRESSES_FROM"] != "endpointslices" || config.Data["IPVSPROXY_NODE_ADDRESSES_NAMESPACE"] != nodeAddressesNamespace {
		t.Errorf("the daemons do not read the published addresses of %s: %v", nodeAddressesNamespace, config.Data)
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
