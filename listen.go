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
// taken are let go. tc is the TLS configuration, for tls-port. A socket
// passed by systemd (see sockets), by the name of an address, serves it
// instead of one bound here.
func listen(cfg *conf.Config, tc *tls.Config, passed map[string]*os.File) (*listeners, error) {
	l := &listeners{tlsConfig: tc}
	var err error
	take := func(on bool, what, addr string) net.Listener {
		if !on || err != nil {
			return nil
		}
		var ln net.Listener
		if f := passed[what]; f != nil {
			ln, err = net.FileListener(f)
			f.Close() // ln holds a duplicate
		} else {
			ln, err = net.Listen("tcp", addr)
		}
		if err != nil {
			err = fmt.Errorf("%s: %w", what, err)
		}
		return ln
	}
	l.plain = take(cfg.Port != 0, "port", net.JoinHostPort(cfg.Bind, strconv.Itoa(cfg.Port)))
	l.tls = take(cfg.TLSPort != 0, "tls-port", net.JoinHostPort(cfg.Bind, strconv.Itoa(cfg.TLSPort)))
	l.metrics = take(cfg.MetricsAddr != "", "metrics-addr", cfg.MetricsAddr)
	if err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

// sockets names the listening sockets passed to the server by systemd's
// socket activation protocol (LISTEN_FDS, LISTEN_FDNAMES; a .socket unit
// with FileDescriptorName=port, tls-port or metrics-addr), which tests use
// too: a socket the parent bound and keeps cannot be taken by another
// process between a port being chosen and served. Each serves the address
// of its name, which must be on in cfg (tls-port needs its files).
func sockets(cfg *conf.Config, passed []*os.File) (map[string]*os.File, error) {
	on := map[string]bool{"port": cfg.Port != 0, "tls-port": cfg.TLSPort != 0, "metrics-addr": cfg.MetricsAddr != ""}
	named := map[string]*os.File{}
	for _, f := range passed {
		name := f.Name()
		switch isOn, known := on[name]; {
		case !known:
			return nil, fmt.Errorf("a socket passed by systemd is named %s: name each port, tls-port or metrics-addr (FileDescriptorName=)", name)
		case !isOn:
			return nil, fmt.Errorf("a socket passed by systemd is named %s, but %s is off in the configuration", name, name)
		case named[name] != nil:
			return nil, fmt.Errorf("two sockets passed by systemd are named %s", name)
		}
		named[name] = f
	}
	return named, nil
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
