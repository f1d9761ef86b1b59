package cluster

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ProxierAccount is the ServiceAccount the proxier runs as, in the end-to-end
// run as in the DaemonSet of deploy/.
type ProxierAccount struct {
	Namespace, Name string
}

// DefaultProxierAccount is kube-system/ipvsproxy.
var DefaultProxierAccount = ProxierAccount{Namespace: metav1.NamespaceSystem, Name: "ipvsproxy"}

func (a ProxierAccount) String() string { return a.Namespace + "/" + a.Name }

// Username is how the API server names a token of the account in RBAC and
// audit: system:serviceaccount:NAMESPACE:NAME.
func (a ProxierAccount) Username() string {
	return "system:serviceaccount:" + a.Namespace + ":" + a.Name
}

// EnsureServiceAccount creates the account unless the applied manifests
// already did.
func EnsureServiceAccount(ctx context.Context, cs kubernetes.Interface, a ProxierAccount) error {
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: a.Name}}
	_, err := cs.CoreV1().ServiceAccounts(a.Namespace).Create(ctx, sa, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service account %s: %w", a, err)
	}
	return nil
}

// BoundClusterRoles lists the ClusterRoles bound to the account by a
// ClusterRoleBinding. None means deploy/'s binding names another account,
// and the proxier would be refused everything.
func BoundClusterRoles(ctx context.Context, cs kubernetes.Interface, a ProxierAccount) ([]string, error) {
	list, err := cs.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list cluster role bindings of %s: %w", a, err)
	}
	var roles []string
	for _, b := range list.Items {
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == a.Namespace && s.Name == a.Name {
				roles = append(roles, b.RoleRef.Name)
			}
		}
	}
	return roles, nil
}

// MintToken asks the TokenRequest API for a token of the account, as the
// kubelet does for a pod's projected token; no Secret is involved.
func MintToken(ctx context.Context, cs kubernetes.Interface, a ProxierAccount, ttl time.Duration) (string, error) {
	seconds := int64(ttl.Seconds())
	tr, err := cs.CoreV1().ServiceAccounts(a.Namespace).CreateToken(ctx, a.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("request token for service account %s: %w", a, err)
	}
	return tr.Status.Token, nil
}
