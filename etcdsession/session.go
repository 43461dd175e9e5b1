// Package etcdsession is what the parts of cluster mode share of etcd:
// a client dialled as configured (Dial), a lease this process keeps
// alive itself and knows the deadline of (Lease), and the history of
// what this server saw of etcd, which notices etcd going back in time
// (History).
package etcdsession

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Config is how to reach etcd.
type Config struct {
	Endpoints   []string
	DialTimeout time.Duration
	TLS         *tls.Config // nil: plain
	Username    string
	Password    string
}

// Dial is a client of etcd as cfg says; with a Username it fetches a
// token from etcd at once. The client logs nothing: the callers say what
// matters in the server's own log.
func Dial(cfg Config) (*clientv3.Client, error) {
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
