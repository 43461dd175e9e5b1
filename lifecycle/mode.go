package lifecycle

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"hash/fnv"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/idserver/idserver/cluster"
	"github.com/idserver/idserver/conf"
	"github.com/idserver/idserver/etcdsession"
	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/tlsfiles"
	"github.com/idserver/idserver/listen"
	"github.com/idserver/idserver/reservation"
	"github.com/idserver/idserver/respserver"
	"github.com/idserver/idserver/seqpull"
	"github.com/idserver/idserver/seqslots"
	"github.com/idserver/idserver/sequence"
	"github.com/idserver/idserver/slotassign"
	"github.com/idserver/idserver/slots"
	"github.com/idserver/idserver/stats"
)

// mode is what single-server and cluster mode do differently: where the
// server-id and the reservation come from, and where they go at the end.
// Run drives either the same way.
type mode interface {
	// reserve begins keeping the reservation, once the ports are taken
	// (a start that fails before leaves the state as it found it), and
	// returns the protocol server's options that follow from the mode.
	reserve(addrs *listen.Set) (respserver.Options, error)
	// attach hands the reservation's generators to srv.
	attach(srv *respserver.Server)
	// handOver, at a graceful stop, gives other servers what they can
	// serve in this one's place (a Redis Cluster node's slots) while it
	// still answers, so that its clients are redirected.
	handOver()
	// finish stores the final reservation and gives the server-id up; it
	// reports false if the final reservation could not be stored. It may
	// be called more than once.
	finish() bool
	// close releases what the mode holds (the state file's lock).
	close()
	// where is where the reservation is kept, for the ready line: a
	// field name (state_file, etcd_endpoints) and its value.
	where() (field, value string)
}

// newMode prepares cfg's mode: it locks and reads the state file, or reads
// etcd's TLS files; peerTLS is what a cluster mode server reaches the
// others' cluster-port with (tls-cluster), nil for plain TCP.
func newMode(cfg *conf.Config, peerTLS *tls.Config, log zerolog.Logger) (mode, error) {
	if cfg.EtcdEndpoints != "" {
		etcdTLS, err := tlsfiles.Etcd(cfg)
		m := &clusterMode{cfg: cfg, log: log, etcdTLS: etcdTLS, peerTLS: peerTLS}
		if err == nil {
			m.seqFile, m.seqKnown, _, err = sequence.OpenFile(clusterSeqPath(cfg))
		}
		return m, err
	}
	m := &singleMode{cfg: cfg, log: log}
	m.identity = reservation.State{ServerID: int64(cfg.ServerID), Layout: cfg.Layout(), Epoch: cfg.EpochMs}
	var err error
	var resumed func()
	if m.store, m.gen, resumed, err = openState(cfg, m.identity, log); err != nil {
		return m, err
	}
	// Under the state file's lock: one process per dir.
	begin := time.Now()
	m.seqFile, m.seqKnown, m.seqRestart, err = sequence.OpenFile(filepath.Join(cfg.Dir, cfg.SeqFile))
	read := time.Since(begin)
	// Said once the start is sure to go on (reserve): a start that fails
	// later, at a port, logs only why.
	m.resumed = func() {
		log.Info().Int("keys", m.seqRestart.Keys).Dur("took", read).Msg("sequences read")
		resumed()
		logSeqRestart(log, m.seqFile.Path(), m.seqRestart)
	}
	return m, err
}

// seqOptions are the sequence table's options of cfg.
func seqOptions(cfg *conf.Config, log zerolog.Logger) sequence.Options {
	return sequence.Options{
		MaxKeys: cfg.SeqMaxKeys, MaxKeyBytes: cfg.SeqMaxKeyBytes,
		SegmentTime: cfg.SeqSegment.Duration, MaxSegment: cfg.SeqMaxSegment, Log: log,
	}
}

// logSeqRestart says what a restart after a crash may have skipped of the
// sequences.
func logSeqRestart(log zerolog.Logger, path string, r sequence.Restart) {
	if r.Clean {
		return
	}
	log.Warn().Str("seq_file", path).Int("keys", r.Keys).Int64("skipped_max", r.Skipped).
		Msg("sequences: the last run did not stop gracefully; each key continues above its reservation on disk, skipping at most the values reserved but not handed out")
}

// singleMode serves with the server-id of the configuration and the
// reservation in the state file.
type singleMode struct {
	cfg      *conf.Config
	log      zerolog.Logger
	identity reservation.State
	store    *reservation.FileStore
	gen      *idgen.Generator
	keeper   *reservation.Keeper
	finished func() bool

	resumed    func() // logs where the state and the sequences resumed from
	seqFile    *sequence.File
	seqKnown   []sequence.Mark // what seqFile held at the start
	seqRestart sequence.Restart
	seqs       *sequence.Table
}

func (m *singleMode) reserve(*listen.Set) (respserver.Options, error) {
	m.resumed()
	keeper, err := reservation.Start(m.gen, m.store, m.identity, m.cfg.ReserveAhead.Duration, m.log)
	if err != nil {
		return respserver.Options{}, err
	}
	m.keeper = keeper
	m.seqs = sequence.New(seqOptions(m.cfg, m.log), m.seqFile, m.seqKnown)
	m.seqKnown = nil
	m.finished = sync.OnceValue(func() bool {
		ok := true
		if err := keeper.Close(context.Background()); err != nil {
			m.log.Error().Err(err).Msg("could not write the final reservation; the last renewal stands, so no ID repeats")
			ok = false
		} else {
			m.log.Info().Str("state_file", m.store.Path()).Msg("reservation written")
		}
		if err := m.seqs.Stop(context.Background()); err != nil {
			m.log.Error().Err(err).Msg("sequences: could not write their last values; the reservations stand, so a restart skips what was reserved and no value repeats")
			ok = false
		}
		return ok
	})
	return respserver.Options{
		Generator:    m.gen,
		Sequences:    m.seqs,
		SeqMaxIncrBy: m.cfg.SeqMaxIncrBy,
		Persistence: func() []stats.Field {
			return slices.Concat(reservation.Info(stats.T("state_file", m.store.Path()), m.cfg.EpochMs, m.gen, keeper.Stats()),
				sequence.Info(stats.T("seq_file", m.seqFile.Path()), m.seqs, &m.seqRestart))
		},
	}, nil
}

func (m *singleMode) attach(*respserver.Server) {}

func (m *singleMode) handOver() {}

func (m *singleMode) finish() bool { return m.finished == nil || m.finished() }

func (m *singleMode) close() {
	if m.seqFile != nil {
		m.seqFile.Close()
	}
	if m.store != nil {
		m.store.Close()
	}
}

func (m *singleMode) where() (string, string) { return "state_file", m.store.Path() }

// clusterMode serves with a server-id claimed from etcd, and the
// reservation kept there; it stands by while it holds none.
type clusterMode struct {
	cfg     *conf.Config
	log     zerolog.Logger
	etcdTLS *tls.Config
	peerTLS *tls.Config // to the others' cluster-port (tls-cluster); nil: plain
	member  *cluster.Member
	slots   *slotassign.Participant // a Redis Cluster node's part in the slots' assignment
	seqs    *sequence.Table
	closing sync.Once

	engine   *seqslots.Engine // a slot owner's keys, per-slot ceilings in etcd
	known    *seqslots.Known  // the engine's: the slot records seen
	src      *slotassign.Source
	seqFile  *sequence.File  // the keys of the slots this server owns
	seqKnown []sequence.Mark // what seqFile held at the start
}

// clusterSeqPath is where a server in cluster mode keeps its copy of the
// marks it took in etcd: beside seq-file, named for the etcd-prefix (the
// marks of another prefix are another cluster's).
func clusterSeqPath(cfg *conf.Config) string {
	h := fnv.New32a()
	h.Write([]byte(cfg.EtcdPrefix))
	return filepath.Join(cfg.Dir, fmt.Sprintf("%s.cluster-%08x", cfg.SeqFile, h.Sum32()))
}

func (m *clusterMode) reserve(lns *listen.Set) (respserver.Options, error) {
	cfg := m.cfg
	pinned := int64(-1)
	if cfg.ServerIDSet {
		pinned = int64(cfg.ServerID)
	}
	// Every server over etcd takes part in the hash slots' assignment:
	// a slot's owner alone serves its keys' sequences.
	src, err := m.joinSlots(lns)
	if err != nil {
		return respserver.Options{}, err
	}
	m.member = cluster.New(cluster.Config{
		Etcd: etcdsession.Config{
			Endpoints:   strings.Split(cfg.EtcdEndpoints, ","),
			DialTimeout: cfg.EtcdDialTimeout.Duration,
			TLS:         m.etcdTLS,
			Username:    cfg.EtcdUsername,
			Password:    cfg.EtcdPassword,
		},
		Prefix:       cfg.EtcdPrefix,
		LeaseTTL:     cfg.EtcdLeaseTTL.Duration,
		Layout:       cfg.Layout(),
		Epoch:        cfg.Epoch(),
		Pinned:       pinned,
		MaxLead:      cfg.MaxLead.Duration,
		MaxWait:      maxWait(cfg),
		ReserveAhead: cfg.ReserveAhead.Duration,
		Addr:         addrOf(lns),
		StatePath:    filepath.Join(cfg.Dir, cfg.StateFile),
		Log:          m.log,
		Slots:        engineSlots{m.slots, m},
	})
	m.src = src
	m.startEngine(src)
	m.seqKnown = nil
	opts := respserver.Options{
		Layout:       cfg.Layout(),
		Epoch:        cfg.Epoch(),
		ClockOffset:  cfg.DebugClockOffset.Duration,
		Sequences:    m.seqs,
		SeqMaxIncrBy: cfg.SeqMaxIncrBy,
		Persistence: func() []stats.Field {
			return slices.Concat(m.member.Persistence(), sequence.Info(stats.T("seq_file", m.seqFile.Path()), m.seqs, nil))
		},
		Cluster: m.member.Info,
		PeerTLS: m.peerTLS,
	}
	opts.SeqHandover, opts.SeqSettling, opts.SeqSeen = m.engine.Handover, m.engine.Settling, m.known.Seen
	if cfg.ClusterEnabled == conf.Yes {
		opts.Slots = src // cluster clients are told -MOVED
	} else {
		opts.Owner = ownerOf(src) // plain clients' commands are forwarded
	}
	return opts, nil
}

// ownerOf is where a plain client's command of a slot goes, by src's
// map: to the node that owns it (moving or not) if another, at its
// cluster-port (its port, before cluster-port came), else here,
// where a slot not taken yet (no owner known: the assignment not read
// yet, or being made) has the command wait for its take (sequence's
// awaitOpen) rather than fail.
func ownerOf(src *slotassign.Source) func(slot int) (addr string, self, ok bool) {
	return func(slot int) (string, bool, bool) {
		_, n := src.Map().Route(src.Self(), slot)
		if n == nil || n.ID == src.Self() || n.IP == "" || cmp.Or(n.BusPort, n.Port) == 0 {
			return "", true, true
		}
		return net.JoinHostPort(n.IP, strconv.Itoa(cmp.Or(n.BusPort, n.Port))), false, true
	}
}

// joinSlots prepares a Redis Cluster node's part in the slots'
// assignment (m.slots), and returns the map it answers from.
func (m *clusterMode) joinSlots(lns *listen.Set) (*slotassign.Source, error) {
	cfg := m.cfg
	self, err := announced(cfg, lns)
	if err != nil {
		return nil, err
	}
	src := slotassign.NewSource(self, slotassign.Kept{Path: filepath.Join(cfg.Dir, slotassign.KeptFile), Prefix: cfg.EtcdPrefix, Log: m.log})
	m.slots = slotassign.New(slotassign.Config{
		Prefix: cfg.EtcdPrefix, TTL: cfg.EtcdLeaseTTL.Duration, DialTimeout: cfg.EtcdDialTimeout.Duration,
		Node: slotassign.Node{ID: self.ID, IP: self.IP, Port: self.Port, TLSPort: self.TLSPort, BusPort: self.BusPort, Hostname: self.Hostname},
		// What the server serves reaches its sequences first (they drop
		// the values they hold of slots that become its), then the map
		// it answers from.
		Serve: func(s *slotassign.Serving) {
			src.Serve(s) // the map first: what moves away is answered -MOVED
			var now []bool
			if s != nil {
				now = s.Slots()
			}
			m.engine.Serve(now)
		},
		Log: m.log,
	})
	return src, nil
}

// startEngine makes a Redis Cluster node's sequences: its keys in its
// own File, each slot's ceiling in etcd (package seqslots), those of
// slots it held at a generation no longer etcd's dropped when it takes
// them; the keys of a slot that moves away are pulled by its new owner
// (package seqpull) from src's announced address.
func (m *clusterMode) startEngine(src *slotassign.Source) {
	gens := m.seqFile.SlotGens()
	m.known = seqslots.KnownIn(m.seqFile, m.log)
	gate := seqslots.NewGate(m.seqFile)
	opts := seqOptions(m.cfg, m.log)
	opts.KeepSlot = func(slot int) bool { return gens[slot] > 0 }
	m.seqs = sequence.New(opts, gate, m.seqKnown)
	pullCfg := seqpull.Config{Password: m.cfg.RequirePass, MaxArgs: m.cfg.ProtoMaxMultibulkLen, TLS: m.peerTLS}
	pull := func(ctx context.Context, owner int64, list []int) ([]sequence.Handed, error) {
		n, ok := src.Node(owner)
		if !ok {
			return nil, fmt.Errorf("server-id %d: no node known", owner)
		}
		return seqpull.Pull(ctx, pullCfg, n, list)
	}
	m.engine = seqslots.NewEngine(seqslots.EngineConfig{Store: m.seqFile, Pull: pull, Ask: askOthers(src, pullCfg, m.log), Wait: 10 * time.Second, Log: m.log}, m.seqs, gate)
}

// askOthers asks each other live node of src, all at once, what it saw
// of slots' records (seqslots.Asker), within ctx: one node that does not
// answer holds the others' answers no longer than ctx.
func askOthers(src *slotassign.Source, cfg seqpull.Config, log zerolog.Logger) seqslots.Asker {
	return func(ctx context.Context, list []int) []map[int]string {
		var mu sync.Mutex
		var wg sync.WaitGroup
		var out []map[int]string
		for _, id := range src.Live() {
			n, ok := src.Node(id)
			if !ok || n.ID == src.Self() {
				continue
			}
			wg.Go(func() {
				seen, err := seqpull.Seen(ctx, cfg, n, list)
				if err != nil {
					log.Info().Err(err).Int64("server_id", id).Msg("sequences: a live server did not say what it saw of slot records etcd lacks; taken without it")
					return
				}
				mu.Lock()
				out = append(out, seen)
				mu.Unlock()
			})
		}
		wg.Wait()
		return out
	}
}

// engineSlots is a Redis Cluster node's part in the slots' assignment,
// with its sequences' slots in etcd under the server-id it holds.
type engineSlots struct {
	*slotassign.Participant
	m *clusterMode
}

func (e engineSlots) Keep(ctx context.Context, cli *clientv3.Client, id int64, l *etcdsession.Lease) (stop func()) {
	s := seqslots.New(seqslots.Config{Client: cli, Prefix: e.m.cfg.EtcdPrefix, Owner: id, Steps: seqslots.DefaultSteps,
		Hist: e.m.member.Session().History(), Known: e.m.known, Log: e.m.log})
	rctx, cancel := context.WithCancel(context.Background())
	go s.Run(rctx)
	go s.Guard(rctx)
	go e.m.known.Follow(rctx, cli, e.m.cfg.EtcdPrefix)
	e.m.engine.Attach(s)
	stopKeep := e.Participant.Keep(ctx, cli, id, l)
	return func() {
		stopKeep()
		e.m.engine.Detach()
		cancel()
	}
}

func (m *clusterMode) attach(srv *respserver.Server) { m.member.Start(srv) }

func (m *clusterMode) handOver() {
	if m.slots != nil && m.slots.HandOver() {
		// Clients of the slots are told -MOVED, and the new owners pull
		// the slots' keys (none if no other server serves: the last one
		// stopping releases its slots for itself or the next to start).
		if othersServe(m.src) {
			ctx, cancel := context.WithTimeout(context.Background(), handOverWait)
			m.engine.AwaitHandedOver(ctx)
			cancel()
		}
		time.Sleep(handOverGrace)
	}
}

// othersServe reports whether src's map has another live node serving
// a slot.
func othersServe(src *slotassign.Source) bool {
	m, self := src.Map(), src.Self()
	me := m.Node(self)
	for slot := range slots.N {
		if v, n := m.RouteNode(me, slot); v == slots.Moved && n.ID != self {
			return true
		}
	}
	return false
}

// handOverWait bounds how long a graceful stop waits for the new owners
// of its slots to pull their keys: past it, they take those left as
// after a crash (each key above its slot's ceiling).
const handOverWait = 3 * time.Second

// handOverGrace is how long a Redis Cluster node still answers, once it
// handed its slots over at a graceful stop, before it closes its ports:
// time for the clients sending to it to be told -MOVED, and so read the
// slots again (go-redis does only every minute otherwise).
const handOverGrace = 250 * time.Millisecond

func (m *clusterMode) finish() bool {
	m.closing.Do(func() {
		if m.seqs != nil {
			// Each key's last value handed out, written to the file (as
			// one server's stop, without a deadline: cut at 2 s, a
			// million keys' records were not written, and a restart
			// skipped what each had in hand).
			if err := m.seqs.Stop(context.Background()); err != nil {
				m.log.Warn().Err(err).Msg("sequences: could not write their last values; the reservations stand, so a restart skips what was reserved and no value repeats")
			}
			if m.engine != nil {
				m.engine.Stop()
			}
		}
		if m.member != nil {
			m.member.Close() // the final reservation, and the id freed for a standby
			m.log.Info().Msg("server-id given up")
		}
	})
	return true
}

func (m *clusterMode) close() {
	if m.seqFile != nil {
		m.seqFile.Close()
	}
}

func (m *clusterMode) where() (string, string) { return "etcd_endpoints", m.cfg.EtcdEndpoints }
