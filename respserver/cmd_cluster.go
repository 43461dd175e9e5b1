package respserver

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/idserver/idserver/internal/replyerr"
	"github.com/idserver/idserver/slots"
)

// With cluster-enabled yes (Options.Slots) the server answers as a Redis
// Cluster node: the CLUSTER commands cluster clients read the topology
// with, and for every command with keys (the table's key positions) a
// check that this node serves their slot (route). The commands read the
// slots.Map current when they run, and nothing else: where the map comes
// from (one node owning every slot, or etcd's assignment) is the
// Source's business.

// clusterCommands are CLUSTER's subcommands that clients and tools use,
// READONLY, READWRITE and ASKING, with Redis 7's flags.
var clusterCommands = []*command{
	{name: "cluster", arity: -2, doc: doc{
		summary: "A container for Redis Cluster commands.", since: "3.0.0", group: "cluster", complexity: "Depends on subcommand.",
	}, subs: []*command{
		{name: "cluster|countkeysinslot", arity: 3, flags: []string{"stale"}, run: cmdClusterCountKeys, doc: doc{
			summary: "Returns the number of keys of this node in the hash slot.", since: "3.0.0", group: "cluster", complexity: "O(N) where N is the number of keys in the slot",
			args: []arg{{name: "slot", typ: "integer"}},
		}},
		{name: "cluster|getkeysinslot", arity: 4, flags: []string{"stale"}, tips: nondeterministic, start: cmdClusterGetKeys, doc: doc{
			summary: "Returns up to count key names of this node in the hash slot.", since: "3.0.0", group: "cluster", complexity: "O(N) where N is the number of keys in the slot",
			args: []arg{{name: "slot", typ: "integer"}, {name: "count", typ: "integer"}},
		}},
		{name: "cluster|help", arity: 2, flags: []string{"loading", "stale"}, run: cmdHelp, doc: doc{
			summary: "Returns helpful text about the different subcommands.", since: "5.0.0", group: "cluster", complexity: "O(1)",
		}},
		{name: "cluster|info", arity: 2, flags: []string{"stale"}, tips: nondeterministic, run: cmdClusterInfo, doc: doc{
			summary: "Returns information about the state of a node.", since: "3.0.0", group: "cluster", complexity: "O(1)",
		}},
		{name: "cluster|keyslot", arity: 3, flags: []string{"stale"}, run: cmdClusterKeySlot, doc: doc{
			summary: "Returns the hash slot for a key.", since: "3.0.0", group: "cluster", complexity: "O(N) where N is the number of bytes in the key",
			args: []arg{{name: "key", typ: "string"}},
		}},
		{name: "cluster|myid", arity: 2, flags: []string{"stale"}, run: cmdClusterMyID, doc: doc{
			summary: "Returns the ID of a node.", since: "3.0.0", group: "cluster", complexity: "O(1)",
		}},
		{name: "cluster|nodes", arity: 2, flags: []string{"stale"}, tips: nondeterministic, start: cmdClusterNodes, doc: doc{
			summary: "Returns the cluster configuration for a node.", since: "3.0.0", group: "cluster", complexity: "O(N) where N is the total number of Cluster nodes",
		}},
		{name: "cluster|seqhandover", arity: -4, flags: []string{"admin", "stale"}, noMonitor: true, run: cmdClusterSeqHandover, doc: doc{
			summary: "Hands the keys of hash slots this node let go to their new owner (idserver, between nodes).", since: "idserver", group: "cluster", complexity: "O(N) where N is the number of keys of the slots",
			args: []arg{{name: "from", typ: "integer"}, {name: "slot", typ: "integer", flags: multiple}},
		}},
		{name: "cluster|seqseen", arity: -3, flags: []string{"admin", "stale"}, noMonitor: true, run: cmdClusterSeqSeen, doc: doc{
			summary: "Returns what this node saw of the sequence records of hash slots (idserver, between nodes).", since: "idserver", group: "cluster", complexity: "O(N) where N is the number of slots",
			args: []arg{{name: "slot", typ: "integer", flags: multiple}},
		}},
		{name: "cluster|shards", arity: 2, flags: []string{"stale"}, tips: nondeterministic, start: cmdClusterShards, doc: doc{
			summary: "Returns the mapping of cluster slots to shards.", since: "7.0.0", group: "cluster", complexity: "O(N) where N is the total number of cluster nodes",
		}},
		{name: "cluster|slots", arity: 2, flags: []string{"stale"}, tips: nondeterministic, start: cmdClusterSlots, doc: doc{
			summary: "Returns the mapping of cluster slots to nodes.", since: "3.0.0", group: "cluster", complexity: "O(N) where N is the total number of Cluster nodes",
		}},
	}},
	{name: "readonly", arity: 1, flags: []string{"loading", "stale", "fast"}, acl: connection, run: cmdClusterOK, doc: doc{
		summary: "Enables read queries for a connection to a cluster replica node (idserver has no replicas: OK).", since: "3.0.0", group: "cluster", complexity: "O(1)",
	}},
	{name: "readwrite", arity: 1, flags: []string{"loading", "stale", "fast"}, acl: connection, run: cmdClusterOK, doc: doc{
		summary: "Enables read-write queries for a connection to a cluster replica node (idserver has no replicas: OK).", since: "3.0.0", group: "cluster", complexity: "O(1)",
	}},
	{name: "asking", arity: 1, flags: []string{"fast"}, acl: connection, run: cmdClusterOK, doc: doc{
		summary: "Sent by cluster clients after an -ASK redirect (idserver sends none: OK).", since: "3.0.0", group: "cluster", complexity: "O(1)",
	}},
}

// errClusterDisabled is Redis's reply to cluster commands with
// cluster-enabled no.
var errClusterDisabled = replyerr.New(replyerr.ERR, "This instance has cluster support disabled")

// view is the cluster as a command sees it: the current map, and this
// node's ID.
type view struct {
	m    *slots.Map
	self string
	me   *slots.Node // self in m, nil if m does not list it
	tls  bool        // the client speaks TLS: it is told the nodes' TLS ports
	// settling, if set, says which slots that moved away are answered
	// -TRYAGAIN rather than -MOVED (Options.SeqSettling).
	settling func(slot int) bool
}

// cluster returns the current view, or the error of a server with
// cluster-enabled no.
func (s *Server) cluster(c *client) (view, error) {
	if s.opts.Slots == nil {
		return view{}, errClusterDisabled
	}
	return s.viewOf(c), nil
}

// viewOf is the cluster as c sees it now.
func (s *Server) viewOf(c *client) view {
	m, self := s.opts.Slots.Map(), s.opts.Slots.Self()
	return view{m: m, self: self, me: m.Node(self), tls: c.TLS(), settling: s.opts.SeqSettling}
}

func cmdClusterOK(s *Server, c *client, args [][]byte) error {
	if _, err := s.cluster(c); err != nil {
		return err
	}
	c.writeString("OK")
	return nil
}

func cmdClusterMyID(s *Server, c *client, args [][]byte) error {
	v, err := s.cluster(c)
	if err != nil {
		return err
	}
	c.writeBulkString(v.self)
	return nil
}

func cmdClusterKeySlot(s *Server, c *client, args [][]byte) error {
	if _, err := s.cluster(c); err != nil {
		return err
	}
	c.writeInt(slots.Of(args[2]))
	return nil
}

// clusterInfoFields are CLUSTER INFO's lines, in Redis 7.0's order. There
// is no cluster bus: no messages, no links, no failure reports.
func (v view) infoText() string {
	state := "ok"
	if v.m.Assigned() < slots.N || v.m.Downs() > 0 {
		state = "fail"
	}
	myEpoch := uint64(0)
	if n := v.m.Node(v.self); n != nil {
		myEpoch = n.ConfigEpoch
	}
	var b strings.Builder
	for _, kv := range []struct {
		k string
		v any
	}{
		{"cluster_state", state}, {"cluster_slots_assigned", v.m.Assigned()}, {"cluster_slots_ok", v.m.Assigned() - v.m.Downs()},
		{"cluster_slots_pfail", 0}, {"cluster_slots_fail", v.m.Downs()}, {"cluster_known_nodes", len(v.m.Nodes)},
		{"cluster_size", v.m.Serving()}, {"cluster_current_epoch", v.m.Epoch}, {"cluster_my_epoch", myEpoch},
		{"cluster_stats_messages_sent", 0}, {"cluster_stats_messages_received", 0}, {"total_cluster_links_buffer_limit_exceeded", 0},
	} {
		fmt.Fprintf(&b, "%s:%v\r\n", kv.k, kv.v)
	}
	return b.String()
}

func cmdClusterInfo(s *Server, c *client, args [][]byte) error {
	v, err := s.cluster(c)
	if err != nil {
		return err
	}
	c.writeVerbatim([]byte(v.infoText()))
	return nil
}

// span is a run of slots one node owns, first to last.
type slotSpan struct {
	first, last int
	owner       string
}

// spans are the map's ranges, in slot order, with adjacent ranges of one
// owner merged (moving or not: clients are told the owner), as Redis
// lists them.
func (v view) spans() []slotSpan {
	var out []slotSpan
	for _, r := range v.m.Ranges {
		if n := len(out); n > 0 && out[n-1].owner == r.Owner && out[n-1].last+1 == r.First {
			out[n-1].last = r.Last
			continue
		}
		out = append(out, slotSpan{r.First, r.Last, r.Owner})
	}
	return out
}

// nodes are the map's nodes in the order every command lists them (and
// every node, reading the same map): by the first slot each owns, those
// without slots last, by ID.
func (v view) nodes() []*slots.Node {
	first := map[string]int{}
	for _, sp := range v.spans() {
		if _, ok := first[sp.owner]; !ok {
			first[sp.owner] = sp.first
		}
	}
	nodes := make([]*slots.Node, len(v.m.Nodes))
	for i := range v.m.Nodes {
		nodes[i] = &v.m.Nodes[i]
	}
	slices.SortStableFunc(nodes, func(a, b *slots.Node) int {
		fa, oka := first[a.ID]
		fb, okb := first[b.ID]
		switch {
		case oka && okb:
			return fa - fb
		case oka != okb:
			if oka {
				return -1
			}
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	return nodes
}

// mapWait bounds how long CLUSTER SLOTS, SHARDS and NODES wait, on a
// node that has read no slot assignment yet (a first start: none kept in
// dir), for its first: a cluster client copes with a slow reply best.
// redis-py's RedisCluster raises at once, from its constructor, after an
// empty map ("All slots are not covered") or an error from every node;
// node-redis's createCluster reads an empty map as one and then fails
// every command for as long as it lives, and fails connect() after an
// error; go-redis and ioredis read again after either. A reply that is
// only late is read by all of them, within their timeouts: 800 ms is
// under the shortest, ioredis's slotsRefreshTimeout of 1 s (go-redis's
// read timeout is 3 s, Jedis's 2 s, redis-py's and node-redis's none).
// Past it, -CLUSTERDOWN: every client reads an error as a node it cannot
// use now, and tries another, or again later; never an empty map.
const mapWait = 800 * time.Millisecond

var errNoMap = replyerr.New(replyerr.CLUSTERDOWN, "The cluster is down: no slot assignment read from etcd yet")

// listing has write answer with the current view, once its map lists
// slots: at once if it does, else off the loop once it does, or
// -CLUSTERDOWN after mapWait.
func (s *Server) listing(c *client, write func(v view)) (later, error) {
	v, err := s.cluster(c)
	if err != nil {
		return later{}, err
	}
	if v.m.Assigned() > 0 {
		write(v)
		return later{}, nil
	}
	return offLoop(func() error {
		t := time.NewTimer(mapWait)
		defer t.Stop()
		select {
		case <-s.opts.Slots.Listed():
			return nil
		case <-t.C:
			return errNoMap
		}
	}, func(c *client, err error) (later, error) {
		if err == nil {
			write(s.viewOf(c))
		}
		return later{}, err
	}), nil
}

// port is the port the client is told for n: the one of its own kind
// (TLS or plain), as Redis tells it, or the other where n has none.
func (v view) port(n *slots.Node) int {
	if v.tls && n.TLSPort != 0 || n.Port == 0 {
		return n.TLSPort
	}
	return n.Port
}

// cmdClusterSlots is CLUSTER SLOTS: each run of slots with its owner's
// address, port, ID and, as Redis 7 does, its hostname when one is
// announced.
func cmdClusterSlots(s *Server, c *client, args [][]byte) (later, error) {
	return s.listing(c, func(v view) {
		spans := v.spans()
		c.writeArray(len(spans))
		for _, sp := range spans {
			n := v.m.Node(sp.owner)
			c.writeArray(3)
			c.writeInt(sp.first)
			c.writeInt(sp.last)
			c.writeArray(4)
			c.writeBulkString(n.IP)
			c.writeInt(v.port(n))
			c.writeBulkString(n.ID)
			if n.Hostname == "" {
				c.writeMap(0)
			} else {
				c.writeMap(1)
				c.writeBulkString("hostname")
				c.writeBulkString(n.Hostname)
			}
		}
	})
}

// cmdClusterShards is CLUSTER SHARDS: a shard per node (no replicas),
// its slots as start, end pairs, and the node's details as Redis 7.0
// gives them.
func cmdClusterShards(s *Server, c *client, args [][]byte) (later, error) {
	return s.listing(c, func(v view) {
		spans := v.spans()
		nodes := v.nodes()
		c.writeArray(len(nodes))
		for _, n := range nodes {
			c.writeMap(2)
			c.writeBulkString("slots")
			var own []int
			for _, sp := range spans {
				if sp.owner == n.ID {
					own = append(own, sp.first, sp.last)
				}
			}
			c.writeArray(len(own))
			for _, x := range own {
				c.writeInt(x)
			}
			c.writeBulkString("nodes")
			c.writeArray(1)
			fields := 6
			for _, present := range []bool{n.Port != 0, n.TLSPort != 0, n.Hostname != ""} {
				if present {
					fields++
				}
			}
			c.writeMap(fields)
			c.writeBulkString("id")
			c.writeBulkString(n.ID)
			if n.Port != 0 {
				c.writeBulkString("port")
				c.writeInt(n.Port)
			}
			if n.TLSPort != 0 {
				c.writeBulkString("tls-port")
				c.writeInt(n.TLSPort)
			}
			c.writeBulkString("ip")
			c.writeBulkString(n.IP)
			c.writeBulkString("endpoint")
			c.writeBulkString(n.IP)
			if n.Hostname != "" {
				c.writeBulkString("hostname")
				c.writeBulkString(n.Hostname)
			}
			c.writeBulkString("role")
			c.writeBulkString("master")
			c.writeBulkString("replication-offset")
			c.writeInt(0)
			c.writeBulkString("health")
			c.writeBulkString("online")
		}
	})
}

// cmdClusterNodes is CLUSTER NODES: a line per node in Redis's format.
// The bus port after @ is the node's cluster-port (the servers' own
// port; etcd is the cluster's manager, clients do not use it), or Redis's
// default, port + 10000, for a node that announces none.
func cmdClusterNodes(s *Server, c *client, args [][]byte) (later, error) {
	return s.listing(c, func(v view) {
		spans := v.spans()
		var b strings.Builder
		for _, n := range v.nodes() {
			port := v.port(n)
			fmt.Fprintf(&b, "%s %s:%d@%d", n.ID, n.IP, port, cmp.Or(n.BusPort, port+10000))
			if n.Hostname != "" {
				b.WriteString("," + n.Hostname)
			}
			flags := "master"
			if n.ID == v.self {
				flags = "myself,master"
			}
			fmt.Fprintf(&b, " %s - 0 0 %d connected", flags, n.ConfigEpoch)
			for _, sp := range spans {
				switch {
				case sp.owner != n.ID:
				case sp.first == sp.last:
					fmt.Fprintf(&b, " %d", sp.first)
				default:
					fmt.Fprintf(&b, " %d-%d", sp.first, sp.last)
				}
			}
			b.WriteByte('\n')
		}
		c.writeVerbatim([]byte(b.String()))
	})
}

var errInvalidSlot = replyerr.New(replyerr.ERR, "Invalid slot")

// cmdClusterCountKeys is CLUSTER COUNTKEYSINSLOT: this node's keys in
// the slot; 0 for a slot it does not own, as Redis answers (its keys are
// the owner's to count).
func cmdClusterCountKeys(s *Server, c *client, args [][]byte) error {
	v, err := s.cluster(c)
	if err != nil {
		return err
	}
	slot, ok := parseInt(args[2])
	if !ok {
		return errNotInteger
	}
	if slot < 0 || slot >= slots.N {
		return errInvalidSlot
	}
	if !v.owns(int(slot)) {
		c.writeInt(0)
		return nil
	}
	seq, err := s.sequences()
	if err != nil {
		c.writeInt(0)
		return nil
	}
	c.writeInt(seq.CountSlot(int(slot))) // the slot's own list of keys
	return nil
}

// cmdClusterGetKeys is CLUSTER GETKEYSINSLOT: up to count of this node's
// keys in the slot; none for a slot it does not own, as Redis answers.
// Keys that would not fit the client's hard output limit fail the
// command, as KEYS does, rather than be collected and then close the
// client.
func cmdClusterGetKeys(s *Server, c *client, args [][]byte) (later, error) {
	v, err := s.cluster(c)
	if err != nil {
		return later{}, err
	}
	slot, ok1 := parseInt(args[2])
	count, ok2 := parseInt(args[3])
	if !ok1 || !ok2 {
		return later{}, errNotInteger
	}
	if slot < 0 || slot >= slots.N || count < 0 {
		return later{}, replyerr.New(replyerr.ERR, "Invalid slot or number of keys")
	}
	if !v.owns(int(slot)) {
		c.writeArray(0)
		return later{}, nil
	}
	what := fmt.Sprintf("CLUSTER GETKEYSINSLOT %d %d", slot, count)
	return s.slotKeys(c, int(slot), int(count), what, func(c *client, keys []string) {
		c.writeArray(len(keys))
		for _, k := range keys {
			c.writeBulkString(k)
		}
	})
}

// owns reports whether this node owns slot (moving, or down, or not).
func (v view) owns(slot int) bool {
	n := v.m.Owner(slot)
	return n != nil && n.ID == v.self
}

// slotKeys has reply answer with up to limit of the keys of slot, read
// from the slot's own list off the loop, bounded by the output limit
// (outputBound): past it, the command (what) fails.
func (s *Server) slotKeys(c *client, slot, limit int, what string, reply func(c *client, keys []string)) (later, error) {
	seq, err := s.sequences()
	if err != nil {
		reply(c, nil)
		return later{}, nil
	}
	bound := s.outputBound()
	var keys []string
	return offLoop(func() error {
		keys = seq.KeysInSlot(slot, limit)
		size := 0
		for _, k := range keys {
			if size += keyReplyBytes(k); size > bound {
				keys = nil
				return errOverOutput(what, bound)
			}
		}
		return nil
	}, func(c *client, err error) (later, error) {
		if err == nil {
			reply(c, keys)
		}
		return later{}, err
	}), nil
}

var errCrossSlot = replyerr.New(replyerr.CROSSSLOT, "Keys in request don't hash to the same slot")

// route checks that this node serves the keys of a command: all in one
// slot, which it owns and which is not moving, as Redis Cluster's
// getNodeByQuery decides. slot carries the slot of the keys seen so far
// across the commands of a transaction (-1: none yet).
func (v view) route(cmd *command, args [][]byte, slot *int) error {
	for i := range cmd.keyIndexes(len(args)) {
		ks := slots.Of(args[i])
		switch {
		case *slot == -1:
			*slot = ks
		case *slot != ks:
			return errCrossSlot
		}
	}
	if *slot == -1 {
		return nil
	}
	switch verdict, n := v.m.RouteNode(v.me, *slot); verdict {
	case slots.Moved:
		if v.settling != nil && v.settling(*slot) {
			return errTryAgain
		}
		return replyerr.Newf(replyerr.MOVED, "%d %s:%d", *slot, n.IP, v.port(n))
	case slots.TryAgain:
		return errTryAgain
	case slots.Unassigned:
		return errSlotNotServed
	}
	return nil
}

var (
	// errTryAgain is Redis's reply for keys of a slot being moved
	// (clusterRedirectClient, CLUSTER_REDIR_UNSTABLE): clients retry
	// after a pause.
	errTryAgain      = replyerr.New(replyerr.TRYAGAIN, "Multiple keys request during rehashing of slot")
	errSlotNotServed = replyerr.New(replyerr.CLUSTERDOWN, "Hash slot not served")
)

// route is the check of one command's keys, nil for a command without
// keys or with cluster-enabled no.
func (s *Server) route(c *client, cmd *command, args [][]byte) error {
	if s.opts.Slots == nil || cmd.keys.first == 0 {
		return nil
	}
	slot := -1
	return c.batch.view(c.Start(), func() view { return s.viewOf(c) }).route(cmd, args, &slot)
}

// routeTransaction is EXEC's check of every queued command's keys
// together, as Redis's: one slot for the whole transaction, served here.
func (s *Server) routeTransaction(c *client, tx *transaction) error {
	if s.opts.Slots == nil {
		return nil
	}
	v := s.viewOf(c)
	slot := -1
	var scratch [][]byte
	for _, q := range tx.cmds {
		if q.cmd.keys.first == 0 {
			continue
		}
		if err := v.route(q.cmd, tx.args(q, scratch[:0]), &slot); err != nil {
			return err
		}
	}
	return nil
}

// keyIndexes yields the indexes of the keys in a call of cmd with n
// arguments, by its key positions (a last of -1: up to the last).
func (cmd *command) keyIndexes(n int) func(yield func(int) bool) {
	return func(yield func(int) bool) {
		k := cmd.keys
		if k.first == 0 {
			return
		}
		last := k.last
		if last < 0 {
			last += n
		}
		for i := k.first; i <= last && i < n; i += max(k.step, 1) {
			if !yield(i) {
				return
			}
		}
	}
}

// notOwn is DBSIZE's, SCAN's and KEYS's filter over etcd: it says
// whether a key is of a slot another node owns (or none does), so that
// a cluster client summing over the nodes counts each key once; with
// cluster-enabled no, of a slot Owner places elsewhere (the keys of a
// slot let go stay in the table a while, for its new owner's pull). nil
// when this node owns every key: one server, or it owns every slot.
func (s *Server) notOwn() func(key string) bool {
	if s.opts.Slots == nil {
		return s.notOwnPlain()
	}
	m, self := s.opts.Slots.Map(), s.opts.Slots.Self()
	if m.OwnsAll(self) {
		return nil
	}
	return func(key string) bool {
		n := m.Owner(slots.Of([]byte(key)))
		return n == nil || n.ID != self
	}
}

// notOwnPlain is notOwn with cluster-enabled no: nil without Owner.
func (s *Server) notOwnPlain() func(key string) bool {
	if s.opts.Owner == nil {
		return nil
	}
	return func(key string) bool {
		_, self, _ := s.opts.Owner(slots.Of([]byte(key)))
		return !self
	}
}

// cmdClusterSeqSeen is a taker's question of what this node saw of the
// records of slots etcd does not hold: for each it saw, its number and
// the record, flat, in slot order.
func cmdClusterSeqSeen(s *Server, c *client, args [][]byte) error {
	if s.opts.SeqSeen == nil {
		return replyerr.New(replyerr.ERR, "this node keeps no sequence records")
	}
	list, err := slotArgs(args[2:])
	if err != nil {
		return err
	}
	seen := s.opts.SeqSeen(list)
	c.writeArray(2 * len(seen))
	for _, slot := range slices.Sorted(maps.Keys(seen)) {
		c.writeInt(slot)
		c.writeBulkString(seen[slot])
	}
	return nil
}

// slotArgs parses hash slot numbers.
func slotArgs(args [][]byte) ([]int, error) {
	list := make([]int, len(args))
	for i, a := range args {
		slot, ok := parseInt(a)
		if !ok || slot < 0 || slot >= slots.N {
			return nil, errInvalidSlot
		}
		list[i] = int(slot)
	}
	return list, nil
}

// cmdClusterSeqHandover is a slot's new owner's pull of the keys of slots
// this node let go, a page at a time (CLUSTER SEQHANDOVER from slot
// [slot ...], from a place in the first slot's keys): for each slot in
// turn, its number, the generation at which this node held it (0: it
// cannot hand it over), each key with its last value (flat), and the
// place its next page starts at (0: none); the slots past a page's end
// are left out, and asked for again.
func cmdClusterSeqHandover(s *Server, c *client, args [][]byte) error {
	if s.opts.SeqHandover == nil {
		return replyerr.New(replyerr.ERR, "this node hands over no sequences")
	}
	from, ok := parseInt(args[2])
	if !ok || from < 0 || from > math.MaxInt32 {
		return replyerr.New(replyerr.ERR, "the place to hand over from is not a non-negative integer")
	}
	list, err := slotArgs(args[3:])
	if err != nil {
		return err
	}
	handed := s.opts.SeqHandover(int(from), list, s.handoverPage())
	c.writeArray(len(handed))
	for _, h := range handed {
		c.writeArray(4)
		c.writeInt(h.Slot)
		c.writeInt64(h.Gen)
		c.writeArray(2 * len(h.Marks))
		for _, m := range h.Marks {
			c.writeBulkString(m.Key)
			c.writeInt64(m.Value)
		}
		c.writeInt(h.Next)
	}
	return nil
}

// handoverPage is the budget of a CLUSTER SEQHANDOVER reply: 1 MiB at
// most, and well within the client's output limits (the pull reads each
// reply before it asks for the next), so that a slot of any size moves
// (a slot of 100,000 keys of 512 bytes, 51 MB in one reply, closed the
// pull's connection at the hard limit, and was taken as after a crash).
func (s *Server) handoverPage() int {
	page := min(1<<20, s.outputBound()/4)
	if s.opts.Output.Soft > 0 {
		page = min(page, s.opts.Output.Soft/2)
	}
	return page
}
