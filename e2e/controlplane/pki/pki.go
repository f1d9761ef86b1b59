package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// File names inside the PKI directory, shared with start.sh.
const (
	CAFile            = "ca.crt"
	CAKeyFile         = "ca.key"
	ServingCertFile   = "apiserver.crt"
	ServingKeyFile    = "apiserver.key"
	AdminCertFile     = "admin.crt"
	AdminKeyFile      = "admin.key"
	ServiceAccountKey = "sa.key"
	ServiceAccountPub = "sa.pub"
)

// AdminUser is the admin client certificate's user; its group system:masters
// is bound to cluster-admin by the API server's bootstrap policy.
const (
	AdminUser  = "e2e-admin"
	AdminGroup = "system:masters"
)

// validity is short: the files live only as long as one test run.
const validity = 24 * time.Hour

// Options says which names the serving certificate must carry.
type Options struct {
	// ServingIPs are the addresses clients dial: the host's 127.0.0.1 and the
	// guest's view of the host (192.0.2.100 through qemu's guestfwd), plus the
	// in-cluster "kubernetes" Service address.
	ServingIPs []net.IP
	// ServingDNSNames are names clients may dial.
	ServingDNSNames []string
}

// Generate writes a CA, a serving certificate, an admin client certificate
// and a service-account key pair into dir, creating dir if needed.
func Generate(dir string, opts Options) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create PKI directory %s: %w", dir, err)
	}
	now := time.Now()

	caKey, err := newKey()
	if err != nil {
		return fmt.Errorf("generate CA key: %w", err)
	}
	caTemplate := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "ipvsproxy-e2e-ca"},
		NotBefore:             now.Add(-time.Hour), // tolerate a guest clock slightly behind the host
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caCert, err := sign(caTemplate, caTemplate, caKey.Public(), caKey)
	if err != nil {
		return fmt.Errorf("self-sign CA certificate: %w", err)
	}

	servingKey, err := newKey()
	if err != nil {
		return fmt.Errorf("generate serving key: %w", err)
	}
	servingCert, err := sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: opts.ServingIPs,
		DNSNames:    opts.ServingDNSNames,
	}, caCert, servingKey.Public(), caKey)
	if err != nil {
		return fmt.Errorf("sign serving certificate: %w", err)
	}

	adminKey, err := newKey()
	if err != nil {
		return fmt.Errorf("generate admin key: %w", err)
	}
	adminCert, err := sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: AdminUser, Organization: []string{AdminGroup}},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, caCert, adminKey.Public(), caKey)
	if err != nil {
		return fmt.Errorf("sign admin client certificate: %w", err)
	}

	saKey, err := newKey()
	if err != nil {
		return fmt.Errorf("generate service-account signing key: %w", err)
	}

	files := []namedPEM{
		{CAFile, certPEM(caCert)},
		{ServingCertFile, certPEM(servingCert)},
		{AdminCertFile, certPEM(adminCert)},
	}
	for name, key := range map[string]*ecdsa.PrivateKey{
		CAKeyFile: caKey, ServingKeyFile: servingKey, AdminKeyFile: adminKey, ServiceAccountKey: saKey,
	} {
		b, err := keyPEM(key)
		if err != nil {
			return fmt.Errorf("encode %s: %w", name, err)
		}
		files = append(files, namedPEM{name, b})
	}
	pub, err := publicKeyPEM(saKey.Public())
	if err != nil {
		return fmt.Errorf("encode %s: %w", ServiceAccountPub, err)
	}
	files = append(files, namedPEM{ServiceAccountPub, pub})

	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, f.pem, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}

type namedPEM struct {
	name string
	pem  []byte
}

// ECDSA P-256 keys: generated in microseconds and accepted everywhere the API
// server takes a key, including service-account token signing (ES256).
func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func sign(template, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	template.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, template, parent, pub, signer)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func keyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func publicKeyPEM(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}
