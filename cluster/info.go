package cluster

import (
	"fmt"
	"slices"
	"strings"

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
	}, m.sess.Status()...)
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
