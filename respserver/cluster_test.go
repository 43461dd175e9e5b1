package respserver

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/rediscluster"
	"github.com/idserver/idserver/slots"
	"github.com/idserver/idserver/stats"
)

// startClusterNode runs a server with cluster-enabled yes: one node,
// announced as 127.0.0.1 (and hostname, if any) on its own port, owning
// every slot; it returns the server's address, the Source, and the node.
func startClusterNode(t *testing.T, hostname string) (string, *slots.Static, slots.Node) {
	t.Helper()
	id := strings.Repeat("5e", 20)
	src := slots.NewStatic(id, slots.Single(slots.Node{ID: id}))
	_, addr := startServer(t, idgen.Settings{}, withSequences(t, Options{Slots: src}))
	_, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	self := slots.Node{ID: id, IP: "127.0.0.1", Port: p, Hostname: hostname}
	src.Set(slots.Single(self))
	return addr, src, self
}

// clusterLikeRedis are the sessions whose replies must be those of
// redis-server --cluster-enabled yes with every slot on its one node,
// byte for byte once its node id and port are ours. (GETKEYSINSLOT
// lists a slot's keys newest first in Redis, oldest first in idserver:
// the sessions give no slot two keys.)
var clusterLikeRedis = [][]string{
	{"CLUSTER", "INFO"}, {"CLUSTER", "SLOTS"}, {"CLUSTER", "SHARDS"}, {"CLUSTER", "NODES"}, {"CLUSTER", "MYID"},
	{"CLUSTER", "KEYSLOT", "foo"}, {"CLUSTER", "KEYSLOT", "{user1000}.following"}, {"CLUSTER", "KEYSLOT", ""},
	{"CLUSTER", "COUNTKEYSINSLOT", "12182"}, {"CLUSTER", "GETKEYSINSLOT", "12182", "10"},
	{"INCR", "foo"}, {"INCR", "{bar}2"}, {"INCR", "bar"},
	{"CLUSTER", "COUNTKEYSINSLOT", "12182"}, {"CLUSTER", "GETKEYSINSLOT", "12182", "10"}, {"CLUSTER", "GETKEYSINSLOT", "12182", "1"},
	{"CLUSTER", "GETKEYSINSLOT", "12182", "0"}, {"CLUSTER", "COUNTKEYSINSLOT", "0"}, {"DBSIZE"},
	{"CLUSTER", "COUNTKEYSINSLOT", "x"}, {"CLUSTER", "COUNTKEYSINSLOT", "16384"}, {"CLUSTER", "COUNTKEYSINSLOT", "-1"},
	{"CLUSTER", "GETKEYSINSLOT", "1", "-1"}, {"CLUSTER", "GETKEYSINSLOT", "16384", "1"}, {"CLUSTER", "GETKEYSINSLOT", "1", "x"},
	{"CLUSTER", "KEYSLOT"}, {"CLUSTER", "MYID", "x"}, {"CLUSTER", "SLOTS", "x"}, {"CLUSTER", "FOO"}, {"CLUSTER"},
	{"READONLY"}, {"READWRITE"}, {"ASKING"}, {"READONLY", "x"},
	{"MGET", "a", "b"}, {"MGET", "{a}1", "{a}2"}, {"EXISTS", "foo", "bar"}, {"EXISTS", "bar", "{bar}2", "bar"}, {"GET", "foo"},
	{"WATCH", "a", "b"}, {"SELECT", "1"}, {"SELECT", "0"}, {"INFO", "cluster"},
	{"MULTI"}, {"GET", "{a}x"}, {"GET", "b"}, {"EXEC"}, {"EXEC"},
	{"MULTI"}, {"MGET", "a", "b"}, {"GET", "a"}, {"EXEC"},
	{"MULTI"}, {"GET", "{a}x"}, {"INCR", "{a}y"}, {"EXEC"},
}

// TestClusterRepliesLikeRedis compares every reply of clusterLikeRedis
// with redis-server's, in RESP2 and RESP3, with and without an
// announced hostname.
func TestClusterRepliesLikeRedis(t *testing.T) {
	for _, hostname := range []string{"", "node1.example"} {
		args := []string{"--cluster-announce-ip", "127.0.0.1"}
		if hostname != "" {
			args = append(args, "--cluster-announce-hostname", hostname)
		}
		for _, resp3 := range []bool{false, true} {
			redisAddr := rediscluster.Start(t, args...)
			addr, _, self := startClusterNode(t, hostname)
			redisID := dialRaw(t, redisAddr).do("CLUSTER", "MYID").(string)
			_, redisPort, _ := net.SplitHostPort(redisAddr)
			rp, _ := strconv.Atoi(redisPort)
			ours := func(b []byte) string { // redis-server's id and ports made ours
				s := strings.ReplaceAll(string(b), redisID, self.ID)
				s = strings.ReplaceAll(s, ":"+redisPort+"@"+strconv.Itoa(rp+10000), ":"+strconv.Itoa(self.Port)+"@"+strconv.Itoa(self.Port+10000))
				return strings.ReplaceAll(s, ":"+redisPort+"\r\n", ":"+strconv.Itoa(self.Port)+"\r\n")
			}
			want, got := rawSession(t, redisAddr, resp3, clusterLikeRedis), rawSession(t, addr, resp3, clusterLikeRedis)
			for i, cmd := range clusterLikeRedis {
				if w := ours(want[i]); string(got[i]) != w {
					t.Errorf("hostname %q resp3 %v: %q: idserver replied\n%q\nredis-server (its id and port ours)\n%q", hostname, resp3, cmd, got[i], w)
				}
			}
		}
	}
}

// rawSession runs cmds on a new connection to addr (after HELLO 3 for
// resp3) and returns each reply's bytes.
func rawSession(t *testing.T, addr string, resp3 bool, cmds [][]string) [][]byte {
	c := dialRaw(t, addr)
	if resp3 {
		c.do("HELLO", "3")
	}
	out := make([][]byte, len(cmds))
	for i, cmd := range cmds {
		c.send(encode(cmd...))
		b, err := rawReply(c.r, nil)
		if err != nil {
			t.Fatalf("%s: %q: %v", addr, cmd, err)
		}
		out[i] = b
	}
	return out
}

// rawReply appends the bytes of one whole reply read from r to b.
func rawReply(r *bufio.Reader, b []byte) ([]byte, error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return b, err
	}
	b = append(b, line...)
	n, _ := strconv.Atoi(strings.TrimSpace(string(line[1:])))
	switch line[0] {
	case '$', '=', '!':
		if n >= 0 {
			body := make([]byte, n+2)
			_, err = io.ReadFull(r, body)
			b = append(b, body...)
		}
	case '*', '~', '>', '%':
		if line[0] == '%' {
			n *= 2
		}
		for range max(n, 0) {
			if b, err = rawReply(r, b); err != nil {
				break
			}
		}
	}
	return b, err
}

// TestClusterRedirects: a key of another node's slot gets -MOVED to it, a
// moving slot's -TRYAGAIN, an unowned one's -CLUSTERDOWN, inside MULTI
// too (and EXEC then discards it); keyless commands are served whatever
// the map says; DBSIZE, SCAN, KEYS, COUNTKEYSINSLOT and GETKEYSINSLOT
// count only the node's own keys (Redis: 0 and none for a slot another
// node owns).
func TestClusterRedirects(t *testing.T) {
	addr, src, self := startClusterNode(t, "")
	c := dialRaw(t, addr)
	for _, k := range []string{"foo", "bar", "{bar}2", "baz"} {
		c.do("INCR", k)
	}
	other := slots.Node{ID: strings.Repeat("7a", 20), IP: "10.1.2.3", Port: 7000}
	fooSlot, barSlot := slots.Of([]byte("foo")), slots.Of([]byte("bar")) // 12182, 5061
	bazSlot := slots.Of([]byte("baz"))                                   // 4813
	m, err := slots.NewMap(3, []slots.Node{self, other}, []slots.Range{
		{First: 0, Last: bazSlot, Owner: self.ID, State: slots.Moving},
		{First: bazSlot + 1, Last: 9999, Owner: self.ID},
		{First: 10000, Last: 16000, Owner: other.ID},
	})
	if err != nil {
		t.Fatal(err)
	}
	src.Set(m)
	for _, tt := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"GET", "foo"}, "MOVED 12182 10.1.2.3:7000"},
		{[]string{"INCR", "foo"}, "MOVED 12182 10.1.2.3:7000"},
		{[]string{"GET", "bar"}, "1"},
		{[]string{"MGET", "bar", "{bar}2"}, "[1 1]"},
		{[]string{"GET", "baz"}, "TRYAGAIN Multiple keys request during rehashing of slot"},
		{[]string{"GET", "{x}16383"}, "CLUSTERDOWN Hash slot not served"},
		{[]string{"EXISTS", "bar", "foo"}, "CROSSSLOT Keys in request don't hash to the same slot"},
		{[]string{"DBSIZE"}, "3"},
		{[]string{"KEYS", "*"}, "[baz bar {bar}2]"}, // slot by slot: baz 4813, bar 5061
		{[]string{"SCAN", "0", "COUNT", "100"}, "[0 [baz bar {bar}2]]"},
		{[]string{"CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(fooSlot)}, "0"},
		{[]string{"CLUSTER", "GETKEYSINSLOT", strconv.Itoa(fooSlot), "10"}, "[]"},
		{[]string{"CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(barSlot)}, "2"},
		{[]string{"CLUSTER", "GETKEYSINSLOT", strconv.Itoa(barSlot), "10"}, "[bar {bar}2]"},
		{[]string{"MULTI"}, "OK"},
		{[]string{"GET", "bar"}, "QUEUED"},
		{[]string{"GET", "foo"}, "MOVED 12182 10.1.2.3:7000"},
		{[]string{"EXEC"}, "EXECABORT Transaction discarded because of previous errors."},
		{[]string{"MULTI"}, "OK"},
		{[]string{"GET", "bar"}, "QUEUED"},
	} {
		if got := fmtReply(c.do(tt.cmd...)); got != tt.want {
			t.Errorf("%q: %s, want %s", tt.cmd, got, tt.want)
		}
	}
	// The map changes between MULTI and EXEC: EXEC checks again.
	m2, _ := slots.NewMap(4, []slots.Node{self, other}, []slots.Range{{First: 0, Last: slots.N - 1, Owner: other.ID}})
	src.Set(m2)
	if got := fmtReply(c.do("EXEC")); got != "MOVED 5061 10.1.2.3:7000" {
		t.Errorf("EXEC after bar's slot moved away: %s", got)
	}
	for _, cmd := range [][]string{{"GETID"}, {"MGETID", "2"}, {"DECODEID", "1"}, {"IDRANGE", "0", "1"}, {"PING"}} {
		if got := fmtReply(c.do(cmd...)); strings.HasPrefix(got, "MOVED") || strings.HasPrefix(got, "CLUSTERDOWN") {
			t.Errorf("%q: %s, keyless commands are served anywhere", cmd, got)
		}
	}
}

// TestGetKeysInSlotBounded: GETKEYSINSLOT with a count whose keys would
// pass the client's hard output limit fails, as KEYS does, and the
// client stays connected; a count that fits is answered whole.
func TestGetKeysInSlotBounded(t *testing.T) {
	id := strings.Repeat("5e", 20)
	src := slots.NewStatic(id, slots.Single(slots.Node{ID: id}))
	_, addr := startServer(t, idgen.Settings{}, withSequences(t, Options{Slots: src, ConnOptions: ConnOptions{Output: OutputLimits{Hard: 1 << 20}}}))
	c := newClient(t, addr, 1)
	long := strings.Repeat("x", 400)
	incrAll(t, c, 5000, func(i int) string { return "{t}" + long + strconv.Itoa(i) }) // 2 MB of keys
	slot := strconv.Itoa(slots.Of([]byte("t")))
	raw := dialRaw(t, addr)
	if got := fmtReply(raw.do("CLUSTER", "GETKEYSINSLOT", slot, "100000000")); !strings.Contains(got, "hard output limit of 1048576 bytes") {
		t.Fatalf("GETKEYSINSLOT %s 100000000 over 2 MB of keys: %.200s", slot, got)
	}
	if got := raw.do("CLUSTER", "GETKEYSINSLOT", slot, "1000"); len(got.([]any)) != 1000 {
		t.Fatalf("GETKEYSINSLOT %s 1000 after: %.200v", slot, got)
	}
}

// unlisted is a Source whose map lists no slot until Listed is closed.
type unlisted struct {
	*slots.Static
	listed chan struct{}
}

func (u unlisted) Listed() <-chan struct{} { return u.listed }

// TestClusterSlotsNeverEmpty: a node that has no slot assignment to tell
// yet (a first start, etcd not read) does not answer CLUSTER SLOTS,
// SHARDS or NODES with an empty map: the reply waits for the first one,
// and past mapWait is -CLUSTERDOWN.
func TestClusterSlotsNeverEmpty(t *testing.T) {
	id := strings.Repeat("5e", 20)
	self := slots.Node{ID: id, IP: "127.0.0.1", Port: 7000}
	none, _ := slots.NewMap(0, []slots.Node{self}, nil)
	src := unlisted{slots.NewStatic(id, none), make(chan struct{})}
	_, addr := startServer(t, idgen.Settings{}, withSequences(t, Options{Slots: src}))
	c := dialRaw(t, addr)
	for _, sub := range []string{"SLOTS", "SHARDS", "NODES"} {
		begin := time.Now()
		got := fmtReply(c.do("CLUSTER", sub))
		if !strings.HasPrefix(got, "CLUSTERDOWN") || time.Since(begin) < mapWait {
			t.Errorf("CLUSTER %s with no assignment: %q after %v, want -CLUSTERDOWN after %v", sub, got, time.Since(begin), mapWait)
		}
	}
	time.AfterFunc(100*time.Millisecond, func() {
		src.Set(slots.Single(self))
		close(src.listed)
	})
	if got := fmtReply(c.do("CLUSTER", "SLOTS")); got != "[[0 16383 [127.0.0.1 7000 "+id+" []]]]" {
		t.Errorf("CLUSTER SLOTS as the first assignment comes: %s", got)
	}
}

// fmtReply is a reply as text: an error's text, an array's elements.
func fmtReply(v any) string {
	switch v := v.(type) {
	case error:
		return v.Error()
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = fmtReply(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return strings.TrimSpace(strings.ReplaceAll(strings.Trim(fmtAny(v), "\""), "\n", " "))
}

func fmtAny(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case nil:
		return "nil"
	}
	return "?"
}

// TestClusterDisabled: with cluster-enabled no, the cluster commands get
// Redis's reply and nothing claims to be a cluster, in etcd's cluster
// mode either (its fields, cluster.Member.Info's, follow cluster_enabled:0).
func TestClusterDisabled(t *testing.T) {
	etcdFields := func() []stats.Field {
		return []stats.Field{stats.T("etcd_prefix", "/idserver/")}
	}
	_, addr := startServer(t, idgen.Settings{}, Options{Cluster: etcdFields})
	c := dialRaw(t, addr)
	for _, cmd := range [][]string{{"CLUSTER", "INFO"}, {"CLUSTER", "SLOTS"}, {"CLUSTER", "KEYSLOT", "a"}, {"READONLY"}, {"ASKING"}} {
		if got := fmtReply(c.do(cmd...)); got != "ERR This instance has cluster support disabled" {
			t.Errorf("%q: %s", cmd, got)
		}
	}
	if got := c.do("INFO", "cluster").(string); !strings.Contains(got, "cluster_enabled:0\r\netcd_prefix:/idserver/") || strings.Count(got, "cluster_enabled") != 1 {
		t.Errorf("INFO cluster: %q", got)
	}
	if got := fmtReply(c.do("MGET", "a", "b")); strings.Contains(got, "CROSSSLOT") {
		t.Errorf("MGET across slots: %s", got)
	}
}

// TestKeySpecsLikeRedis: COMMAND INFO gives each command with keys
// redis-server 7's key positions and key spec (cluster clients route by
// them), SET's flags aside (Redis's RW access update variable_flags
// come from its GET option, which idserver refuses); the ID commands
// have no keys, and no request_policy tip.
func TestKeySpecsLikeRedis(t *testing.T) {
	redis := dialRaw(t, rediscluster.Start(t))
	_, addr := startServer(t, idgen.Settings{}, Options{})
	c := dialRaw(t, addr)
	for _, resp3 := range []bool{false, true} {
		if resp3 {
			redis.do("HELLO", "3")
			c.do("HELLO", "3")
		}
		for _, name := range []string{"get", "mget", "incr", "incrby", "set", "setnx", "exists", "type", "strlen", "ttl", "pttl", "touch", "watch", "keys", "scan", "dbsize"} {
			want := redis.do("COMMAND", "INFO", name).([]any)[0].([]any)
			got := c.do("COMMAND", "INFO", name).([]any)[0].([]any)
			if name == "set" {
				want[8], got[8] = withoutFlags(want[8]), withoutFlags(got[8])
			}
			for _, i := range []int{3, 4, 5, 8} {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Errorf("resp3 %v: COMMAND INFO %s [%d]: %#v, redis-server's %#v", resp3, name, i, got[i], want[i])
				}
			}
		}
		for _, name := range []string{"getid", "mgetid", "decodeid", "idrange"} {
			got := c.do("COMMAND", "INFO", name).([]any)[0].([]any)
			if got[3] != int64(0) || reflect.ValueOf(got[8]).Len() != 0 {
				t.Errorf("COMMAND INFO %s: first key %v, key specs %v; want none", name, got[3], got[8])
			}
			// Sent to one node of the client's choice: no request_policy.
			if tips := fmt.Sprint(got[7]); strings.Contains(tips, "request_policy") ||
				strings.Contains(tips, "nondeterministic_output") != (name == "getid" || name == "mgetid") {
				t.Errorf("COMMAND INFO %s: tips %v", name, tips)
			}
		}
	}
}

// withoutFlags is a list of key specs without their flags and notes, in
// either protocol's form.
func withoutFlags(specs any) any {
	list, ok := specs.([]any)
	if st, isSet := specs.(set); isSet {
		list, ok = st, true
	}
	if !ok {
		return specs
	}
	var out []any
	for _, spec := range list {
		switch spec := spec.(type) {
		case map[string]any:
			m := map[string]any{}
			for k, v := range spec {
				if k != "flags" && k != "notes" {
					m[k] = v
				}
			}
			out = append(out, m)
		case []any:
			var kv []any
			for i := 0; i+1 < len(spec); i += 2 {
				if spec[i] != "flags" && spec[i] != "notes" {
					kv = append(kv, spec[i], spec[i+1])
				}
			}
			out = append(out, kv)
		}
	}
	return out
}

// countingSource counts the reads of its map.
type countingSource struct {
	*slots.Static
	reads int
}

func (c *countingSource) Map() *slots.Map { c.reads++; return c.Static.Map() }

// TestRouteReadsTheMapOncePerBatch checks that the keys of a pipeline are
// routed by one read of the map (a read checks the lease: a clock
// reading), read again only once viewFresh has passed, and that the next
// batch reads it again: a slot moved between two batches is answered
// -MOVED by the second.
func TestRouteReadsTheMapOncePerBatch(t *testing.T) {
	id := strings.Repeat("5e", 20)
	self := slots.Node{ID: id, IP: "127.0.0.1", Port: 6551}
	src := &countingSource{Static: slots.NewStatic(id, slots.Single(self))}
	s := New(withSequences(t, Options{Slots: src}))
	p := testPipe(s)
	defer p.Close()
	const n = 1000
	batch := []byte(strings.Repeat(encode("GET", "{a}x"), n))
	start := time.Now()
	p.Send(batch)
	elapsed := time.Since(start)
	if got, want := string(p.Written()), strings.Repeat("$-1\r\n", n); got != want {
		t.Fatalf("got %.100q, want %d nil replies", got, n)
	}
	if most := 1 + int(elapsed/viewFresh); src.reads < 1 || src.reads > most {
		t.Fatalf("%d GETs in one batch (%v) read the map %d times, want 1 to %d", n, elapsed, src.reads, most)
	}
	other := slots.Node{ID: strings.Repeat("6f", 20), IP: "127.0.0.2", Port: 6552}
	m, err := slots.NewMap(0, []slots.Node{self, other}, []slots.Range{{First: 0, Last: slots.N - 1, Owner: other.ID}})
	if err != nil {
		t.Fatal(err)
	}
	src.Set(m)
	p.Reset()
	p.Send([]byte(encode("GET", "{a}x")))
	if got, want := string(p.Written()), fmt.Sprintf("-MOVED %d 127.0.0.2:6552\r\n", slots.Of([]byte("a"))); got != want {
		t.Fatalf("the next batch, the slot moved: got %q, want %q", got, want)
	}
}

// BenchmarkClusterIncr is BenchmarkHandle's INCR on a node with
// cluster-enabled yes: the key's slot checked against the map.
func BenchmarkClusterIncr(b *testing.B) {
	id := strings.Repeat("5e", 20)
	s := New(withSequences(b, Options{Slots: slots.NewStatic(id, slots.Single(slots.Node{ID: id}))}))
	if _, err := s.opts.Sequences.Incr("counter", 1); err != nil { // its first segment
		b.Fatal(err)
	}
	p := testPipe(s)
	cmd := []byte(encode("INCR", "counter"))
	b.ReportAllocs()
	for b.Loop() {
		p.Send(cmd)
		p.Reset()
	}
}
