package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/idserver/idserver/conf"
)

// listeners are the addresses a server serves: plain TCP (port), TLS
// (tls-port) and HTTP (metrics-addr); each nil when off.
type listeners struct {
	plain, tls, metrics net.Listener
	tlsConfig           *tls.Config
}

// listen takes every address of cfg, or none: on an error, those already
// taken are let go. tc is the TLS configuration, for tls-port.
func listen(cfg *conf.Config, tc *tls.Config) (*listeners, error) {
	l := &listeners{tlsConfig: tc}
	var err error
	take := func(port int, what string) net.Listener {
		if port == 0 || err != nil {
			return nil
		}
		var ln net.Listener
		if ln, err = net.Listen("tcp", net.JoinHostPort(cfg.Bind, strconv.Itoa(port))); err != nil {
			err = fmt.Errorf("%s: %w", what, err)
		}
		return ln
	}
	l.plain = take(cfg.Port, "port")
	l.tls = take(cfg.TLSPort, "tls-port")
	if cfg.MetricsAddr != "" && err == nil {
		if l.metrics, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			err = fmt.Errorf("metrics-addr: %w", err)
		}
	}
	if err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

// close lets every address go.
func (l *listeners) close() {
	for _, ln := range []net.Listener{l.plain, l.tls, l.metrics} {
		if ln != nil {
			ln.Close()
		}
	}
}

// clientAuth is crypto/tls's value of each tls-auth-clients.
var clientAuth = [...]tls.ClientAuthType{
	conf.TLSAuthYes:      tls.RequireAndVerifyClientCert,
	conf.TLSAuthOptional: tls.VerifyClientCertIfGiven,
	conf.TLSAuthNo:       tls.NoClientCert,
}

// tlsConfig reads the certificate, its key and the CA of cfg; nil
// without a tls-port. As in Redis, TLS 1.2 and 1.3 are offered.
func tlsConfig(cfg *conf.Config) (*tls.Config, error) {
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

// etcdTLSConfig is the TLS configuration for etcd: nil (plain) unless
// etcd-ca-cert-file is set.
func etcdTLSConfig(cfg *conf.Config) (*tls.Config, error) {
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
