// Package cluster runs a server in cluster mode: it claims a server-id in
// etcd with a key bound to its lease, keeps the id's reservation T in etcd
// fenced by that claim, and stands by, serving no IDs, while it holds none.
// With cluster-enabled it also takes part in the hash slots' assignment
// (Config.Slots): kept while it holds an id, observed while it holds none.
//
// Why no ID repeats, whatever clocks, pauses and partitions do. Each id
// has one key reserved/<id> holding T, written only in a transaction that
// checks that claim/<id> still carries the writer's lease; a new holder
// creates claim/<id> and reads T in one transaction. So the writes of T
// and the claims of an id are totally ordered by etcd, and every T a
// holder stored was stored before the next holder's claim, which read the
// last of them, T_last. A holder issues no ID whose time reaches a T it
// has not stored (its generator's ceiling rises only after a successful
// write), so all its IDs are below T_last, for ever, even if it is paused
// or cut off and still believes it holds the id. The next holder starts
// at max(now, T_last): all its IDs are at or above T_last. Holders of
// different ids differ in the server-id field, and servers of another
// layout or epoch under the same prefix never hold ids at once: a claim
// needs the layout key to hold its layout and no live key of another
// layout to exist, two guards of different keys (etcd.go: claim).
//
// When etcd loses data (keys deleted by hand, a restore from an older
// snapshot) T_last may be gone or lower than what was issued. So a claim
// never starts below the highest T this process stored or saw in etcd
// for the id (it follows every reservation of its layout: known.go), nor
// below the copy of its own that every save writes first to a file in
// dir; where etcd has no T, or one below those, or this server has no
// history of etcd to check it against, it also starts max-lead-ms ahead
// of the clock, as a first start does. A server that finds etcd lost data
// writes back the T it knows for the ids etcd lost, for servers new to
// etcd. A server that sees etcd go back (etcdsession.History) claims
// nothing until an operator confirms. What remains: a server new to etcd
// that claims an id whose T etcd lost before any server that knew it
// wrote it back starts only max-lead-ms ahead of its clock.
//
// The claim is bound to an etcdsession.Lease, which says why it is not
// etcd's concurrency.Session.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/etcdsession"
	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/reservation"
)

// memberState is what a Member does, as INFO cluster's cluster_state
// shows it.
type memberState int

const (
	connecting memberState = iota // to etcd, at the start
	standingBy                    // holds no id: every one is held, or etcd is unreachable
	holding                       // holds an id, and serves IDs
)

func (s memberState) String() string { return [...]string{"connecting", "standby", "holding"}[s] }

// Config configures a Member.
type Config struct {
	Etcd     etcdsession.Config // how to reach etcd
	Prefix   string             // ends with "/"
	LeaseTTL time.Duration      // of the lease a claim is bound to (etcd-lease-ttl)

	Layout idgen.Layout // of every generator, the same for every server under Prefix
	Epoch  time.Time    // likewise
	// Pinned is the only server-id this server may claim; -1: the lowest
	// free one.
	Pinned int64
	// For each generator, as in single-server mode.
	MaxLead, MaxWait, ReserveAhead time.Duration
	// Addr identifies this server in its claim key: host:port.
	Addr string
	// StatePath is dir/state-file: every save of an id's reservation is
	// first written to the file reservation.ClaimPath names beside it
	// (StatePath.l<I>-<S>-<R>-e<epoch>.id<N>), locked while the id is
	// held. "": no local copy.
	StatePath string
	Log       zerolog.Logger // the server's logger
	// Slots, if set, has this server take part in the hash slots'
	// assignment (Redis Cluster): kept while it holds an id, observed
	// while it holds none.
	Slots Slots
}

// Slots is a server's part in the hash slots' assignment
// (slotassign.Participant).
type Slots interface {
	// Keep keeps the server's part while it holds server-id id under
	// lease l, until stop is called.
	Keep(ctx context.Context, cli *clientv3.Client, id int64, l *etcdsession.Lease) (stop func())
	// Observe follows the assignment while no Keep runs, until ctx ends;
	// client is etcd's client, once connected.
	Observe(ctx context.Context, client func() (*clientv3.Client, error))
}

// Target is what a Member drives: the protocol server. SetGenerator has
// it issue IDs with a generator; Standby stops it, for the reason why
// (the protocol server tells its clients, in its own terms).
type Target interface {
	SetGenerator(*idgen.Generator)
	Standby(why error)
}

// Member holds a server-id for a Target, or stands it by.
type Member struct {
	cfg    Config
	target Target
	sess   *etcdsession.Session
	k      keys
	log    zerolog.Logger

	mu     sync.Mutex
	state  memberState
	held   int64 // -1: none
	seen   map[int64]string
	keeper *reservation.Keeper
	gen    *idgen.Generator

	known      *known       // by id, the highest T this process stored or saw in etcd
	existed    bool         // the layout key was there before this server: under mu
	lastLogged string       // why this server could not claim, last logged (logOnce); under mu
	reserved   atomic.Int64 // the last T this server stored, ms since the epoch
	claims     atomic.Uint64
	losses     atomic.Uint64
	saves      atomic.Uint64 // of keepers closed already
	failures   atomic.Uint64

	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a Member for cfg that claims nothing until Start; its
// Info and Persistence answer from the start.
func New(cfg Config) *Member {
	return &Member{
		cfg: cfg, log: cfg.Log,
		k:     newKeys(cfg.Prefix, cfg.Layout, cfg.Epoch),
		sess:  etcdsession.New(cfg.Etcd, historyPath(cfg.StatePath)),
		state: connecting, held: -1, known: newKnown(),
		done: make(chan struct{}),
	}
}

// Session is m's connection to etcd, for what else the server keeps
// there.
func (m *Member) Session() *etcdsession.Session { return m.sess }

// Start keeps claiming a server-id for target until Close. It does not
// wait: target stands by until an id is held, etcd unreachable or not.
func (m *Member) Start(target Target) {
	ctx, cancel := context.WithCancel(context.Background())
	m.target, m.cancel = target, cancel
	target.Standby(errors.New("no server-id held yet: connecting to etcd"))
	go m.run(ctx)
	go m.sess.Poll(ctx)
	if m.cfg.Slots != nil {
		go m.cfg.Slots.Observe(ctx, m.sess.Client)
	}
}

// Close gives the id up: the final reservation is stored and the lease
// revoked, so a standby can take the id at once. It must not run
// alongside Start.
func (m *Member) Close() {
	if m.cancel == nil {
		return // never started
	}
	m.cancel()
	<-m.done
	m.sess.Close()
}

// connect makes the etcd client, which with etcd-username fetches a token
// from etcd at once.
func (m *Member) connect() error {
	if err := m.sess.Connect(); err != nil {
		m.logOnce(zerolog.WarnLevel, err, "cluster: cannot connect to etcd; standing by")
		return fmt.Errorf("cannot connect to etcd (%s): %w", strings.Join(m.cfg.Etcd.Endpoints, ","), err)
	}
	return nil
}

// cli is etcd's client: connected, from the first session on.
func (m *Member) cli() *clientv3.Client {
	cli, _ := m.sess.Client()
	return cli
}

// run claims, holds until the claim is lost, and claims again.
func (m *Member) run(ctx context.Context) {
	defer close(m.done)
	prefer := m.cfg.Pinned
	var backoff time.Duration
	for ctx.Err() == nil {
		id, err := int64(-1), m.connect()
		if err == nil {
			id, err = m.session(ctx, prefer)
		}
		if id >= 0 {
			prefer = id // its old id, if still free
		}
		if ctx.Err() != nil {
			return
		}
		m.standby(err)
		if id >= 0 && !errors.Is(err, errNotHeld) {
			backoff = 0 // it held one: try again at once
		} else {
			backoff = min(max(2*backoff, 100*time.Millisecond), m.cfg.LeaseTTL/2)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
	}
}

// logOnce logs why this server cannot claim (etcd unreachable, etcd gone
// back) at level the first time, and at debug level while the same msg
// repeats at every retry: a condition is one line, not one a second. A
// claim ends it.
func (m *Member) logOnce(level zerolog.Level, err error, msg string) {
	m.mu.Lock()
	repeated := m.lastLogged == msg
	m.lastLogged = msg
	m.mu.Unlock()
	if repeated {
		level = zerolog.DebugLevel
	}
	m.log.WithLevel(level).Err(err).Strs("etcd_endpoints", m.cfg.Etcd.Endpoints).Msg(msg)
}

// standby stands the target by with the reason why.
func (m *Member) standby(why error) {
	m.mu.Lock()
	m.held, m.state = -1, standingBy
	m.mu.Unlock()
	m.target.Standby(fmt.Errorf("no server-id held: %w", why))
}

// session takes a lease, claims an id (waiting as a standby while none is
// free), serves it until the claim is lost, and gives it up. It returns
// the id it held (-1: none) and why the session ended.
func (m *Member) session(ctx context.Context, prefer int64) (int64, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The grant first revokes the leases of earlier sessions that etcd
	// still keeps (it refreshes leases when it restarts): one would hold
	// this server's old id.
	l, err := m.sess.Grant(sctx, m.cfg.LeaseTTL, min(m.cfg.Etcd.DialTimeout, m.cfg.LeaseTTL/6))
	if err != nil {
		if ctx.Err() == nil {
			m.logOnce(zerolog.WarnLevel, err, "cluster: etcd unreachable; standing by")
		}
		return -1, fmt.Errorf("etcd unreachable (%s): %w", strings.Join(m.cfg.Etcd.Endpoints, ","), err)
	}
	defer m.sess.Release(l)
	go l.Keep(sctx)
	go m.follow(sctx)
	existed, err := checkLayout(sctx, m.cli(), m.k)
	if err != nil {
		m.log.Error().Err(err).Msg("cluster: refusing to claim a server-id")
		return -1, err
	}
	m.mu.Lock()
	m.existed = existed
	m.mu.Unlock()
	c, err := m.waitForClaim(sctx, l, prefer)
	if err != nil {
		return -1, err
	}
	return c.id, m.hold(sctx, c, l)
}

// waitForClaim claims an id, standing by while none is free until one
// frees up or the lease is lost.
func (m *Member) waitForClaim(ctx context.Context, l *etcdsession.Lease, prefer int64) (claimed, error) {
	for {
		if err := m.checkEtcd(ctx); err != nil {
			return claimed{}, err
		}
		c, rev, err := claim(ctx, m.cli(), m.k, l.ID(), m.holder(), m.candidates(prefer))
		if err == nil {
			m.claims.Add(1)
			m.refreshSeen(ctx)
			return c, nil
		}
		if errors.Is(err, errLayout) {
			m.logOnce(zerolog.ErrorLevel, err, "cluster: refusing to claim a server-id")
			return claimed{}, err
		}
		if !errors.Is(err, errAllHeld) {
			return claimed{}, fmt.Errorf("etcd: %w", err)
		}
		m.refreshSeen(ctx)
		why := m.allHeld()
		m.standby(fmt.Errorf("%s; standing by until one frees up", why))
		m.logOnce(zerolog.InfoLevel, nil, "cluster: standing by: "+why)
		// Any claim key deleted (a holder's lease expired or was revoked)
		// may free one: try again then, or after a lease's time anyway.
		w := m.cli().Watch(ctx, m.k.claims(), clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithFilterPut())
		if err := m.waitFreed(ctx, w, l); err != nil {
			return claimed{}, err
		}
	}
}

// waitFreed waits for a claim key to go, while the lease lives.
func (m *Member) waitFreed(ctx context.Context, w clientv3.WatchChan, l *etcdsession.Lease) error {
	retry := time.NewTimer(m.cfg.LeaseTTL)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-retry.C:
			return nil
		case resp, ok := <-w:
			if !ok || resp.Err() != nil || len(resp.Events) > 0 {
				return nil
			}
		case <-l.Lost():
			return errors.New("lost the etcd lease while standing by: " + l.Why())
		}
	}
}

// candidates are the ids to try, in order: the pinned one only, or the
// preferred one (this server's last) and then every id from 0.
func (m *Member) candidates(prefer int64) []int64 {
	if m.cfg.Pinned >= 0 {
		return []int64{m.cfg.Pinned}
	}
	ids := make([]int64, 0, m.cfg.Layout.MaxServerID()+2)
	if prefer >= 0 {
		ids = append(ids, prefer)
	}
	for id := range m.cfg.Layout.MaxServerID() + 1 {
		ids = append(ids, id)
	}
	return ids
}

// allHeld says which ids are held, for the standby's reply and log: by
// other servers, or by this server's own earlier lease (left by a
// session etcd cut short), which etcd expires within the lease TTL.
func (m *Member) allHeld() string {
	const own = "this server's own earlier lease, which etcd expires within etcd-lease-ttl"
	m.mu.Lock()
	mine := false
	for _, who := range m.seen {
		mine = mine || who == m.holder()
	}
	m.mu.Unlock()
	switch {
	case m.cfg.Pinned >= 0 && mine:
		return fmt.Sprintf("server-id %d (pinned) is held by %s", m.cfg.Pinned, own)
	case m.cfg.Pinned >= 0:
		return fmt.Sprintf("server-id %d (pinned) is held by another server", m.cfg.Pinned)
	case mine:
		return fmt.Sprintf("all %d server-ids (id-range %d) are held, by other servers and by %s", m.cfg.Layout.MaxServerID()+1, m.cfg.Layout.IDBits, own)
	}
	return fmt.Sprintf("all %d server-ids (id-range %d) are held by other servers", m.cfg.Layout.MaxServerID()+1, m.cfg.Layout.IDBits)
}

// errNotHeld is hold's error when it could not serve the id it claimed
// (its local copy is locked by another process, one shutting down on
// the same dir, say): the next claim waits, as when none is free (it
// claimed again at once, 150 times a second, each logged).
var errNotHeld = errors.New("claimed but not held")

// hold serves the claimed id until the claim is lost or ctx ends, then
// stores the final reservation (fenced) and stops the generator.
func (m *Member) hold(ctx context.Context, c claimed, l *etcdsession.Lease) error {
	identity := reservation.State{ServerID: c.id, Layout: m.cfg.Layout, Epoch: m.cfg.Epoch.UnixMilli()}
	local, resumed, err := m.openLocal(identity)
	if err != nil {
		m.logOnce(zerolog.ErrorLevel, err, "cluster: cannot hold the server-id")
		return fmt.Errorf("server-id %d: %w: %w", c.id, errNotHeld, err)
	}
	if local != nil {
		defer local.Close()
	}
	if err := m.awaitKnown(ctx, c.rev); err != nil {
		return fmt.Errorf("server-id %d: reservations written before the claim not known: %w", c.id, err)
	}
	floor := m.start(ctx, c, resumed)
	gen, err := idgen.New(idgen.Settings{
		Layout: m.cfg.Layout, Epoch: m.cfg.Epoch, ServerID: c.id,
		MaxLead: m.cfg.MaxLead, MaxWait: m.cfg.MaxWait,
		Floor: floor, Ceiling: max(floor, 1),
	})
	if err != nil {
		return err
	}
	st := &store{cli: m.cli(), k: m.k, id: c.id, lease: l.ID(), timeout: m.saveTimeout(),
		fenced: make(chan struct{}, 1), last: func(t int64) { m.storedNow(c.id, t) }, seen: m.sess.History().Record}
	if local != nil {
		st.local = local
	}
	keeper, err := reservation.Start(gen, st, identity, m.cfg.ReserveAhead, m.log)
	if err != nil {
		gen.Stop()
		return fmt.Errorf("server-id %d: first reservation: %w", c.id, err)
	}
	m.mu.Lock()
	m.held, m.state, m.keeper, m.gen = c.id, holding, keeper, gen
	m.mu.Unlock()
	m.target.SetGenerator(gen)
	m.sess.History().Trust()
	m.mu.Lock()
	m.lastLogged = "" // claimed: the next failure is news
	m.mu.Unlock()
	m.log.Info().Int64("server_id", c.id).Int64("reserved_ms", c.reserved).Int64("start_ms", floor).Str("lease", fmt.Sprintf("%x", l.ID())).Msg("cluster: holding a server-id")

	stopSlots := m.keepSlots(ctx, c.id, l)
	defer stopSlots()
	why := m.watchClaim(ctx, c.id, l, st.fenced)
	// Stop at once, and INFO says so in the same step: the final write
	// below may wait for etcd.
	lost := fmt.Errorf("lost server-id %d: %s; claiming again", c.id, why)
	m.mu.Lock()
	m.target.Standby(lost)
	m.held, m.state = -1, standingBy
	m.mu.Unlock()
	if ctx.Err() == nil {
		m.losses.Add(1)
		m.log.Warn().Int64("server_id", c.id).Str("reason", why).Msg("cluster: lost the server-id; IDs stop at the reservation stored, claiming again")
	}
	final, cancel := m.finalWrite(ctx)
	if err := keeper.Close(final); err != nil {
		m.log.Debug().Err(err).Msg("cluster: final reservation not stored; the last one stands")
	}
	cancel()
	ks := keeper.Stats()
	m.saves.Add(ks.Saves)
	m.failures.Add(ks.Failures)
	m.mu.Lock()
	m.keeper, m.gen = nil, nil
	m.mu.Unlock()
	return lost
}

// keepSlots keeps the server's part in the slots' assignment while it
// holds id, if it takes part, until the function it returns is called.
func (m *Member) keepSlots(ctx context.Context, id int64, l *etcdsession.Lease) (stop func()) {
	if m.cfg.Slots == nil {
		return func() {}
	}
	return m.cfg.Slots.Keep(ctx, m.cli(), id, l)
}

// finalWrite is the context of the write of a held id's exact end point.
// At shutdown it gets the save timeout, so the next holder starts from
// that point rather than from T. After a loss it gets none: etcd refuses
// it (the claim is not ours) or cannot be reached, and the next claim
// should not wait for that. The local copy is written either way.
func (m *Member) finalWrite(held context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), m.saveTimeout())
	if held.Err() == nil {
		cancel()
	}
	return ctx, cancel
}

// saveTimeout bounds each write of a reservation to etcd: half a lease,
// at most 2 s. A write that takes longer is retried on the keeper's next
// tick rather than left to hang.
func (m *Member) saveTimeout() time.Duration { return min(m.cfg.LeaseTTL/2, 2*time.Second) }

// watchClaim returns when the claim on id is lost, and why: the lease
// expired (no renewal for its TTL) or was revoked, the claim key was
// deleted or taken, or a save was refused by the fence; or ctx ended.
func (m *Member) watchClaim(ctx context.Context, id int64, l *etcdsession.Lease, fenced <-chan struct{}) string {
	w, lw := m.cli().Watch(ctx, m.k.claim(id)), m.cli().Watch(ctx, m.k.live(id))
	for {
		select {
		case <-ctx.Done():
			return "shutting down"
		case <-fenced:
			return "its claim key no longer carries this server's lease"
		case <-l.Lost():
			return l.Why()
		case resp, ok := <-w:
			if why := m.keyLost(ctx, &w, m.k.claim(id), "claim", resp, ok, l.ID()); why != "" {
				return why
			}
		case resp, ok := <-lw:
			if why := m.keyLost(ctx, &lw, m.k.live(id), "live", resp, ok, l.ID()); why != "" {
				return why
			}
		}
	}
}

// keyLost reads a response (ok: the channel is open) of w, the watch of
// key, one of a held id's keys bound to lease (what names it), and says
// why the id is lost, "" if it is not: the key was deleted, or put under
// another lease. A watch that ended (etcd compacted past it, or the
// client closed) is started again in its place.
func (m *Member) keyLost(ctx context.Context, w *clientv3.WatchChan, key, what string, resp clientv3.WatchResponse, ok bool, lease clientv3.LeaseID) string {
	if !ok || resp.Canceled {
		if ctx.Err() != nil {
			return "shutting down"
		}
		*w = m.cli().Watch(ctx, key)
		return ""
	}
	for _, ev := range resp.Events {
		if ev.Type == clientv3.EventTypeDelete || clientv3.LeaseID(ev.Kv.Lease) != lease {
			return "its " + what + " key was deleted or taken"
		}
	}
	return ""
}

// historyPath is where a server keeps what it saw of etcd: beside its
// state file.
func historyPath(statePath string) string {
	if statePath == "" {
		return ""
	}
	return statePath + ".etcd"
}

// checkEtcd refuses to claim while etcd is behind what this server saw
// of it (see history), saying so once in the log.
func (m *Member) checkEtcd(ctx context.Context) error {
	resp, err := m.cli().Get(ctx, m.k.layout)
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	if err := m.sess.History().Check(resp.Header); err != nil {
		m.standby(err) // before the log line: whoever reads it then gets the reason in replies too
		m.logOnce(zerolog.ErrorLevel, err, "cluster: etcd went back in time; refusing to claim a server-id")
		return err
	}
	return nil
}

// openLocal locks the local copy of identity's reservation in dir and
// reads it; nil without StatePath. Another process on this machine
// holding it means two servers believe they hold one id: an error.
func (m *Member) openLocal(identity reservation.State) (*reservation.FileStore, reservation.Resumed, error) {
	if m.cfg.StatePath == "" {
		return nil, reservation.Resumed{}, nil
	}
	local, err := reservation.OpenFile(reservation.ClaimPath(m.cfg.StatePath, identity), m.log)
	if err != nil {
		return nil, reservation.Resumed{}, err
	}
	resumed, err := local.Resume(identity)
	if err != nil {
		local.Close()
		return nil, reservation.Resumed{}, fmt.Errorf("%w (the file is left as it is)", err)
	}
	return local, resumed, nil
}

// start is the time field a claim of c starts at: etcd's T, unless this
// server knows of a higher one (its own saves, the local copy, a T it saw
// in etcd: known), etcd has none, or this server has no history of etcd
// yet (etcdsession.History.Fresh); then above all of them and
// max-lead-ms ahead of the clock (see the package doc). When that means etcd lost data it
// says so loudly, and writes back the T it knows for ids etcd lost.
func (m *Member) start(ctx context.Context, c claimed, local reservation.Resumed) int64 {
	m.mu.Lock()
	own, existed := max(m.known.of(c.id), local.Reserved), m.existed
	m.mu.Unlock()
	fresh := m.sess.History().Fresh()
	if c.reserved > 0 && c.reserved >= own && !fresh {
		return c.reserved
	}
	ahead := time.Now().UnixMilli() - m.cfg.Epoch.UnixMilli() + m.cfg.MaxLead.Milliseconds()
	floor := max(c.reserved, own, ahead)
	ev, msg := m.log.Info(), "cluster: first claim of this server-id; starting max-lead-ms ahead of the clock"
	switch {
	case own > c.reserved:
		go m.republish(ctx)
		ev, msg = m.log.Error(), "cluster: etcd lost data: its reservation for this server-id is below what this server stored or saw there (keys deleted, or etcd restored from an older snapshot?); starting above both, max-lead-ms ahead of the clock"
	case fresh && c.reserved > 0:
		msg = "cluster: this server has no history of etcd (a new server, or etcd confirmed after a restore): starting above etcd's reservation and max-lead-ms ahead of the clock, in case etcd lost a newer one"
	case existed:
		ev, msg = m.log.Warn(), "cluster: no reservation in etcd for this server-id though servers of this layout ran before: it was never claimed, or etcd lost its key; starting max-lead-ms ahead of the clock, safe either way"
	}
	ev.Int64("server_id", c.id).Int64("etcd_reserved_ms", c.reserved).Int64("own_reserved_ms", own).
		Str("local_copy", local.From).Int64("start_ms", floor).Msg(msg)
	return floor
}

// storedNow records that this process stored t as id's T.
func (m *Member) storedNow(id, t int64) {
	m.reserved.Store(t)
	m.known.raise(id, t)
}

// refreshSeen records who holds which id, for INFO.
func (m *Member) refreshSeen(ctx context.Context) {
	if held, _, err := holders(ctx, m.cli(), m.k); err == nil {
		m.mu.Lock()
		m.seen = held
		m.mu.Unlock()
	}
}

// holder is the value of this server's claim keys: who holds the id.
func (m *Member) holder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s pid %d addr %s", host, os.Getpid(), m.cfg.Addr)
}
