package pki

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// The files must form a chain a TLS client accepts for each serving address,
// and the admin certificate must carry the group the API server maps to
// cluster-admin; a wrong key usage or SAN fails here rather than as an opaque
// TLS error in the end-to-end run.
func TestGenerate(t *testing.T) {
	dir := t.TempDir()
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("192.0.2.100")}
	if err := Generate(dir, Options{ServingIPs: ips, ServingDNSNames: []string{"localhost"}}); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	roots := x509.NewCertPool()
	caPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		t.Fatal(err)
	}
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("%s holds no certificate", CAFile)
	}

	serving := loadPair(t, dir, ServingCertFile, ServingKeyFile)
	for _, name := range []string{"127.0.0.1", "192.0.2.100", "localhost"} {
		if _, err := serving.Verify(x509.VerifyOptions{DNSName: name, Roots: roots}); err != nil {
			t.Errorf("serving certificate for %s: %v", name, err)
		}
	}
	if _, err := serving.Verify(x509.VerifyOptions{DNSName: "198.51.100.1", Roots: roots}); err == nil {
		t.Errorf("serving certificate verified for 198.51.100.1, which is not among its SANs")
	}

	admin := loadPair(t, dir, AdminCertFile, AdminKeyFile)
	if _, err := admin.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("admin certificate as a client certificate: %v", err)
	}
	if got := admin.Subject.Organization; len(got) != 1 || got[0] != AdminGroup {
		t.Errorf("admin certificate organizations = %v, want [%s]", got, AdminGroup)
	}

	for _, f := range []string{ServiceAccountKey, ServiceAccountPub} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s missing or empty: %v", f, err)
		}
	}
}

func loadPair(t *testing.T, dir, certFile, keyFile string) *x509.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, certFile), filepath.Join(dir, keyFile))
	if err != nil {
		t.Fatalf("load %s/%s: %v", certFile, keyFile, err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatalf("parse %s: %v", certFile, err)
	}
	return cert
}
