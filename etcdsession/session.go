// Package etcdsession is what the parts of cluster mode share of etcd: a
// server's Session (its client, dialled as configured, the leases it
// granted, and etcd's own status), a Lease this process keeps alive
// itself and knows the deadline of, and the History of what this server
// saw of etcd, which notices etcd going back in time.
package etcdsession

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Config is how to reach etcd.
type Config struct {
	Endpoints   []string      // etcd's client URLs
	DialTimeout time.Duration // bounds a dial, and the Session's own requests
	TLS         *tls.Config   // nil: plain
	Username    string        // "": no authentication
	Password    string        // Username's
}

// dial is a client of etcd as cfg says; with a Username it fetches a
// token from etcd at once. The client logs nothing: the callers say what
// matters in the server's own log.
func dial(cfg Config) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		TLS:         cfg.TLS,
		Username:    cfg.Username,
		Password:    cfg.Password,
		Logger:      zap.NewNop(),
	})
}

// Error names etcd's NOSPACE alarm, or says the error is etcd's.
func Error(err error) error {
	if errors.Is(err, rpctypes.ErrNoSpace) {
		return fmt.Errorf("etcd's NOSPACE alarm is raised: its database reached its quota (compact and defragment etcd, then disarm the alarm; see docs/cluster.md): %w", err)
	}
	return fmt.Errorf("etcd: %w", err)
}

// A Session is a server's connection to etcd: the client, dialled once
// (Connect), its History, the lease granted last, and the leases it
// could not revoke (etcd unreachable), revoked before the next grant:
// etcd keeps leases through its restarts, and one left would hold what
// it binds (the server's old id) for its TTL.
type Session struct {
	cfg  Config
	hist *History

	mu    sync.Mutex
	cli   *clientv3.Client
	lease *Lease             // granted last, until released; nil: none
	stale []clientv3.LeaseID // not revoked yet: etcd was unreachable

	status status // etcd's database size and alarms, as Poll last read them
}

// New is a session of cfg, not connected yet, with its history kept in
// the file at historyPath ("": in memory only).
func New(cfg Config, historyPath string) *Session {
	return &Session{cfg: cfg, hist: NewHistory(historyPath)}
}

// Connect dials etcd, unless it is connected already. It must not run
// alongside itself or Close.
func (s *Session) Connect() error {
	if _, err := s.Client(); err == nil {
		return nil
	}
	cli, err := dial(s.cfg)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.cli = cli
	s.mu.Unlock()
	return nil
}

// Client is etcd's client, once connected.
func (s *Session) Client() (*clientv3.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cli == nil {
		return nil, errors.New("etcd: not connected yet")
	}
	return s.cli, nil
}

// Dial is a new client of the session's etcd, for a caller that wants a
// connection of its own.
func (s *Session) Dial() (*clientv3.Client, error) { return dial(s.cfg) }

// History is what this server saw of etcd.
func (s *Session) History() *History { return s.hist }

// Grant revokes the leases earlier sessions could not, then takes a
// lease of ttl within the dial timeout, each renewal of it waiting at
// most timeout. It is the session's Lease until Released.
func (s *Session) Grant(ctx context.Context, ttl, timeout time.Duration) (*Lease, error) {
	cli, err := s.Client()
	if err != nil {
		return nil, err
	}
	s.revokeStale(cli)
	gctx, cancel := context.WithTimeout(ctx, s.cfg.DialTimeout)
	defer cancel()
	l, err := Grant(gctx, cli, ttl, timeout)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.lease = l
	s.mu.Unlock()
	return l, nil
}

// Release gives l up, so that what it binds frees at once. If etcd is
// unreachable, the next Grant tries again: the lease may outlive an etcd
// restart.
func (s *Session) Release(l *Lease) {
	ok := l.Revoke()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lease = nil
	if !ok {
		s.stale = append(s.stale, l.ID())
	}
}

// revokeStale revokes the leases earlier sessions could not.
func (s *Session) revokeStale(cli *clientv3.Client) {
	s.mu.Lock()
	stale := s.stale
	s.stale = nil
	s.mu.Unlock()
	for _, id := range stale {
		if !revokeID(cli, id) {
			s.mu.Lock()
			s.stale = append(s.stale, id)
			s.mu.Unlock()
		}
	}
}

// Lease is the lease granted last, until released; nil: none.
func (s *Session) Lease() *Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lease
}

// Close closes the client, if connected.
func (s *Session) Close() {
	if cli, err := s.Client(); err == nil {
		cli.Close()
	}
}
