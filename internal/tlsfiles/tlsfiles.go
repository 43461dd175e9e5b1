// Package tlsfiles reads the TLS files the configuration names into
// crypto/tls configurations: the server's, for tls-port, cluster-port's
// (tls-cluster), and its client's, for etcd. A start and --check-config read them the same way,
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

// Cluster is cluster-port's TLS with tls-cluster yes, as Redis's
// cluster bus: serve is what it is served with (this server's
// certificate; a server reaching it must present one tls-ca-cert-file
// signed, so that only servers get in), and dial what this server reaches
// the others' with (its certificate; theirs checked against
// tls-ca-cert-file, not against the address it is reached at, as Redis
// checks its cluster bus: servers announce an address, not a name). Both
// nil with tls-cluster no.
func Cluster(cfg *conf.Config) (serve, dial *tls.Config, err error) {
	if cfg.TLSCluster != conf.Yes {
		return nil, nil, nil
	}
	cert, err := keyPair("tls", cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		return nil, nil, err
	}
	roots, err := certPool("tls-ca-cert-file", cfg.TLSCACertFile)
	if err != nil {
		return nil, nil, err
	}
	serve = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: roots}
	dial = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		// The chain is checked below, the name not.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server presented no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			return err
		}}
	return serve, dial, nil
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
