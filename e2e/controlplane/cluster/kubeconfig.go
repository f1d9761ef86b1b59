package cluster

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Credentials are how a kubeconfig's user authenticates: a client
// certificate (PEM data) or a bearer token.
type Credentials struct {
	ClientCertPEM []byte
	ClientKeyPEM  []byte
	Token         string
}

// WriteKubeconfig writes a self-contained kubeconfig (every certificate
// embedded) so it stays valid when read from another machine, such as the VM
// guest that sees the host's files through a read-only share.
func WriteKubeconfig(path, server string, caPEM []byte, user string, creds Credentials) error {
	const name = "ipvsproxy-e2e"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{
		ClientCertificateData: creds.ClientCertPEM,
		ClientKeyData:         creds.ClientKeyPEM,
		Token:                 creds.Token,
	}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user}
	cfg.CurrentContext = name
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s for %s at %s: %w", path, user, server, err)
	}
	return nil
}
