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

// clientAuth maps tls-auth-clients, which conf checked.
var clientAuth = map[string]tls.ClientAuthType{
	"yes":      tls.RequireAndVerifyClientCert,
	"optional": tls.VerifyClientCertIfGiven,
	"no":       tls.NoClientCert,
}

// tlsConfig reads the certificate, its key and the CA of cfg; nil
// without a tls-port. As in Redis, TLS 1.2 and 1.3 are offered.
func tlsConfig(cfg *conf.Config) (*tls.Config, error) {
	if cfg.TLSPort == 0 {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls-cert-file %s, tls-key-file %s: %w", cfg.TLSCertFile, cfg.TLSKeyFile, err)
	}
	tc := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		ClientAuth:   clientAuth[cfg.TLSAuthClients],
	}
	if cfg.TLSCACertFile != "" {
		pem, err := os.ReadFile(cfg.TLSCACertFile)
		if err != nil {
			return nil, fmt.Errorf("tls-ca-cert-file: %w", err)
		}
		tc.ClientCAs = x509.NewCertPool()
		if !tc.ClientCAs.AppendCertsFromPEM(pem) {
			return nil, errors.New("tls-ca-cert-file " + cfg.TLSCACertFile + ": no PEM certificate in it")
		}
	}
	return tc, nil
}

// etcdTLSConfig is the TLS configuration for etcd: nil (plain) unless
// etcd-ca-cert-file is set.
func etcdTLSConfig(cfg *conf.Config) (*tls.Config, error) {
	if cfg.EtcdCACertFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(cfg.EtcdCACertFile)
	if err != nil {
		return nil, fmt.Errorf("etcd-ca-cert-file: %w", err)
	}
	tc := &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}
	if !tc.RootCAs.AppendCertsFromPEM(pem) {
		return nil, errors.New("etcd-ca-cert-file " + cfg.EtcdCACertFile + ": no PEM certificate in it")
	}
	if cfg.EtcdCertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.EtcdCertFile, cfg.EtcdKeyFile)
		if err != nil {
			return nil, fmt.Errorf("etcd-cert-file %s, etcd-key-file %s: %w", cfg.EtcdCertFile, cfg.EtcdKeyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
