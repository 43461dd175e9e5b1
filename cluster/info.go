package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/reservation"
	"github.com/idserver/idserver/stats"
)

// Info is INFO's cluster section: where this server claims, what it holds
// and what it has seen.
func (m *Member) Info() []stats.Field {
	m.mu.Lock()
	state, held := m.state, m.held
	seen := make([]string, 0, len(m.seen))
	for id, who := range m.seen {
		seen = append(seen, fmt.Sprintf("%d=%s", id, strings.ReplaceAll(who, " ", "_")))
	}
	m.mu.Unlock()
	slices.Sort(seen)
	ttlLeft, id := int64(0), clientv3.LeaseID(0)
	if l := m.sess.Lease(); l != nil {
		ttlLeft, id = max(l.Left().Milliseconds(), 0), l.ID()
	}
	return append([]stats.Field{
		stats.T("etcd_endpoints", strings.Join(m.cfg.Etcd.Endpoints, ",")),
		stats.T("etcd_prefix", m.k.scope),
		stats.T("cluster_state", state.String()),
		stats.G("held_server_id", held, "The server-id held; -1 while standing by."),
		stats.T("lease_id", fmt.Sprintf("%x", int64(id))),
		stats.G("lease_ttl_left_ms", ttlLeft, "Time left on the etcd lease unless renewed."),
		stats.G("etcd_reserved_until_ms", m.cfg.Epoch.UnixMilli()+m.reserved.Load(), "The last reservation T this server stored in etcd (the epoch while none is stored)."),
		stats.G("holders_seen", int64(len(seen)), "Claim keys seen when this server last looked (while standing by)."),
		stats.T("holders", strings.Join(seen, ",")),
		stats.C("claims", m.claims.Load(), "Server-ids claimed."),
		stats.C("lease_losses", m.losses.Load(), "Server-ids lost: lease expired or revoked, claim key gone, or a save refused by the fence."),
	}, m.polled.fields()...)
}

// Persistence is INFO's persistence section in cluster mode: the
// reservation of the id held, kept in etcd, and the writes of every id
// held so far.
func (m *Member) Persistence() []stats.Field {
	m.mu.Lock()
	keeper, gen := m.keeper, m.gen
	m.mu.Unlock()
	k := reservation.Stats{Saves: m.saves.Load(), Failures: m.failures.Load()}
	if keeper != nil {
		ks := keeper.Stats()
		k.Saves, k.Failures, k.LastSave = k.Saves+ks.Saves, k.Failures+ks.Failures, ks.LastSave
	}
	return reservation.Info(stats.T("etcd_reservations", m.k.reservations()), m.cfg.Epoch.UnixMilli(), gen, k)
}

// etcdStatus is what INFO cluster shows of etcd's own state: the size of
// its database and its alarms. At its quota (etcd 3.4: 2 GB by default)
// etcd raises NOSPACE and refuses every write, so no reservation can be
// renewed until an operator compacts, defragments and disarms it.
type etcdStatus struct {
	size, inUse atomic.Int64
	alarms      atomic.Pointer[string] // "none", or their names, "NOSPACE" among them
}

// pollEvery is how often pollEtcd reads etcd's status.
const pollEvery = 2 * time.Second

// pollEtcd reads etcd's database size and alarms every pollEvery until
// ctx ends.
func (m *Member) pollEtcd(ctx context.Context) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if cli, err := m.sess.Client(); err == nil {
			m.readStatus(ctx, cli)
		}
	}
}

// readStatus reads the database size from the first endpoint that
// answers, and the cluster's alarms.
func (m *Member) readStatus(ctx context.Context, cli *clientv3.Client) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Etcd.DialTimeout)
	defer cancel()
	for _, ep := range m.cfg.Etcd.Endpoints {
		if st, err := cli.Status(ctx, ep); err == nil {
			m.polled.size.Store(st.DbSize)
			m.polled.inUse.Store(st.DbSizeInUse)
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
	m.polled.alarms.Store(&alarms)
}

// fields are INFO cluster's fields of etcd's status.
func (s *etcdStatus) fields() []stats.Field {
	alarms := "unknown"
	if a := s.alarms.Load(); a != nil {
		alarms = *a
	}
	nospace := int64(0)
	if strings.Contains(alarms, "NOSPACE") {
		nospace = 1
	}
	return []stats.Field{
		stats.G("etcd_db_size_bytes", s.size.Load(), "etcd's database size, as last read: at its quota etcd raises NOSPACE and refuses every write."),
		stats.G("etcd_db_size_in_use_bytes", s.inUse.Load(), "The part of etcd's database in use; the rest is freed by defragmentation."),
		stats.T("etcd_alarms", alarms),
		stats.G("etcd_alarm_nospace", nospace, "1 while etcd's NOSPACE alarm is raised: no reservation can be renewed."),
	}
}
