// Package tlsfiles reads the TLS files the configuration names into
// crypto/tls configurations: the server's, for tls-port, and its
// client's, for etcd. A start and --check-config read them the same way,
// so that a check that passes means a start reads them too.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/idserver/idserver/conf"
)

// clientAuth is crypto/tls's value of each tls-auth-clients.
var clientAuth = [...]tls.ClientAuthType{
	conf.TLSAuthYes:      tls.RequireAndVerifyClientCert,
	conf.TLSAuthOptional: tls.VerifyClientCertIfGiven,
	conf.TLSAuthNo:       tls.NoClientCert,
}

// Server reads the certificate, its key and the CA of cfg; nil
// without a tls-port. As in Redis, TLS 1.2 and 1.3 are offered.
func Server(cfg *conf.Config) (*tls.Config, error) {
	if cfg.TLSPort == 0 {
		return nil, nil
	}
	cert, err := keyPair("tls", cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		return nil, err
	}
	tc := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		ClientAuth:   clientAuth[cfg.TLSAuthClients],
	}
	if cfg.TLSCACertFile != "" {
		if tc.ClientCAs, err = certPool("tls-ca-cert-file", cfg.TLSCACertFile); err != nil {
			return nil, err
		}
	}
	return tc, nil
}

// keyPair reads the certificate and key of the keys <prefix>-cert-file
// and <prefix>-key-file.
func keyPair(prefix, certFile, keyFile string) (tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return cert, fmt.Errorf("%s-cert-file %s, %s-key-file %s: %w", prefix, certFile, prefix, keyFile, err)
	}
	return cert, nil
}

// certPool reads the CA certificates of the key named key from file.
func certPool(key, file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New(key + " " + file + ": no PEM certificate in it")
	}
	return pool, nil
}

// Etcd is the TLS configuration for etcd: nil (plain) unless
// etcd-ca-cert-file is set.
func Etcd(cfg *conf.Config) (*tls.Config, error) {
	if cfg.EtcdCACertFile == "" {
		return nil, nil
	}
	roots, err := certPool("etcd-ca-cert-file", cfg.EtcdCACertFile)
	if err != nil {
		return nil, err
	}
	tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if cfg.EtcdCertFile != "" {
		cert, err := keyPair("etcd", cfg.EtcdCertFile, cfg.EtcdKeyFile)
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
