// Package testpki makes certificates for tests: a CA, a server
// certificate for 127.0.0.1 and 192.0.2.10 and a client certificate it
// signed, and a client certificate of another CA, as PEM files.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// RemoteIP is the second address the server certificate is for: tests
// give loopback this address in a private network namespace, so that a
// client comes from an address that is not loopback.
const RemoteIP = "192.0.2.10"

// PKI is the certificates, as PEM files in Dir: ca.crt, server.crt and
// server.key, client.crt and client.key, stranger.crt and stranger.key.
type PKI struct {
	Dir      string
	Roots    *x509.CertPool  // the CA
	Client   tls.Certificate // signed by the CA
	Stranger tls.Certificate // signed by a CA no server knows
}

// File is the path of a PEM file of p.
func (p PKI) File(name string) string { return filepath.Join(p.Dir, name) }

// New makes the certificates in a directory of t's.
func New(t *testing.T) PKI {
	t.Helper()
	p := PKI{Dir: t.TempDir(), Roots: x509.NewCertPool()}
	ca, caKey := issue(t, p, "ca", nil, nil)
	p.Roots.AddCert(ca)
	issue(t, p, "server", ca, caKey)
	issue(t, p, "client", ca, caKey)
	other, otherKey := issue(t, p, "other-ca", nil, nil)
	issue(t, p, "stranger", other, otherKey)
	var err error
	if p.Client, err = tls.LoadX509KeyPair(p.File("client.crt"), p.File("client.key")); err != nil {
		t.Fatal(err)
	}
	if p.Stranger, err = tls.LoadX509KeyPair(p.File("stranger.crt"), p.File("stranger.key")); err != nil {
		t.Fatal(err)
	}
	return p
}

// issue writes name.crt and name.key: a CA's when parent is nil, else a
// leaf for 127.0.0.1 and RemoteIP signed by parent.
func issue(t *testing.T, p PKI, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP(RemoteIP)},
	}
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, p.File(name+".crt"), "CERTIFICATE", der)
	writePEM(t, p.File(name+".key"), "EC PRIVATE KEY", keyDER)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
