package cluster

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idserver/idserver/reservation"
	"github.com/idserver/idserver/stats"
)

// Info is INFO's cluster section: where this server claims, what it holds
// and what it has seen.
func (m *Member) Info() []stats.Field {
	m.mu.Lock()
	state, held, lease, deadline := m.state, m.held, m.lease, m.deadline
	seen := make([]string, 0, len(m.seen))
	for id, who := range m.seen {
		seen = append(seen, fmt.Sprintf("%d=%s", id, strings.ReplaceAll(who, " ", "_")))
	}
	m.mu.Unlock()
	slices.Sort(seen)
	ttlLeft := int64(0)
	if lease != 0 {
		ttlLeft = max(time.Until(deadline).Milliseconds(), 0)
	}
	return []stats.Field{
		stats.G("cluster_enabled", 1, "1 in cluster mode: server-ids claimed from etcd."),
		stats.T("etcd_endpoints", strings.Join(m.cfg.Endpoints, ",")),
		stats.T("etcd_prefix", m.k.scope),
		stats.T("cluster_state", state),
		stats.G("held_server_id", held, "The server-id held; -1 while standing by."),
		stats.T("lease_id", fmt.Sprintf("%x", int64(lease))),
		stats.G("lease_ttl_left_ms", ttlLeft, "Time left on the etcd lease unless renewed."),
		stats.G("etcd_reserved_until_ms", m.reserved.Load(), "The last reservation T this server stored in etcd (ms since the epoch)."),
		stats.G("holders_seen", int64(len(seen)), "Claim keys seen when this server last looked (while standing by)."),
		stats.T("holders", strings.Join(seen, ",")),
		stats.C("claims", m.claims.Load(), "Server-ids claimed."),
		stats.C("lease_losses", m.losses.Load(), "Server-ids lost: lease expired or revoked, claim key gone, or a save refused by the fence."),
	}
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
	return reservation.Info("etcd:"+m.k.scope+"reserved/", m.cfg.Epoch.UnixMilli(), gen, k)
}
