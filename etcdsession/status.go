package etcdsession

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/stats"
)

// status is what INFO cluster shows of etcd's own state: the size of its
// database and its alarms. At its quota (etcd 3.4: 2 GB by default) etcd
// raises NOSPACE and refuses every write, so no reservation can be
// renewed until an operator compacts, defragments and disarms it.
type status struct {
	size, inUse atomic.Int64
	alarms      atomic.Pointer[string] // "none", or their names, "NOSPACE" among them
}

// pollEvery is how often Poll reads etcd's status.
const pollEvery = 2 * time.Second

// Poll reads etcd's database size and alarms every pollEvery, once
// connected, until ctx ends: Status shows them.
func (s *Session) Poll(ctx context.Context) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if cli, err := s.Client(); err == nil {
			s.readStatus(ctx, cli)
		}
	}
}

// readStatus reads the database size from the first endpoint that
// answers, and the cluster's alarms.
func (s *Session) readStatus(ctx context.Context, cli *clientv3.Client) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DialTimeout)
	defer cancel()
	for _, ep := range s.cfg.Endpoints {
		if st, err := cli.Status(ctx, ep); err == nil {
			s.status.size.Store(st.DbSize)
			s.status.inUse.Store(st.DbSizeInUse)
			break
		}
	}
	resp, err := cli.AlarmList(ctx)
	if err != nil {
		return
	}
	names := []string{}
	for _, a := range resp.Alarms {
		names = append(names, a.Alarm.String())
	}
	alarms := "none"
	if len(names) > 0 {
		slices.Sort(names)
		alarms = strings.Join(slices.Compact(names), ",")
	}
	s.status.alarms.Store(&alarms)
}

// Status is INFO cluster's fields of etcd's status, as Poll last read
// it.
func (s *Session) Status() []stats.Field {
	alarms := "unknown"
	if a := s.status.alarms.Load(); a != nil {
		alarms = *a
	}
	nospace := int64(0)
	if strings.Contains(alarms, "NOSPACE") {
		nospace = 1
	}
	return []stats.Field{
		stats.G("etcd_db_size_bytes", s.status.size.Load(), "etcd's database size, as last read: at its quota etcd raises NOSPACE and refuses every write."),
		stats.G("etcd_db_size_in_use_bytes", s.status.inUse.Load(), "The part of etcd's database in use; the rest is freed by defragmentation."),
		stats.T("etcd_alarms", alarms),
		stats.G("etcd_alarm_nospace", nospace, "1 while etcd's NOSPACE alarm is raised: no reservation can be renewed."),
	}
}
