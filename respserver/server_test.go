package respserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/idgen/idgentest"
)

func newClient(t testing.TB, addr string, protocol int) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: protocol, PoolSize: 60})
	t.Cleanup(func() { c.Close() })
	return c
}

func TestGoRedis(t *testing.T) {
	for _, protocol := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", protocol), func(t *testing.T) {
			_, addr := startServer(t, idgen.Settings{ServerID: 2}, Options{})
			ctx := context.Background()
			c := newClient(t, addr, protocol)

			a, err := c.Do(ctx, "GETID").Int64()
			if err != nil {
				t.Fatal(err)
			}
			ids, err := c.Do(ctx, "MGETID", 5).StringSlice()
			if err != nil || len(ids) != 5 {
				t.Fatalf("MGETID 5 = %v, %v", ids, err)
			}
			prev := a
			for _, s := range ids {
				id, err := strconv.ParseInt(s, 10, 64)
				if err != nil || id <= prev {
					t.Fatalf("MGETID ids %v not increasing after %d", ids, a)
				}
				prev = id
			}

			v, err := c.Do(ctx, "DECODEID", prev).Result()
			if err != nil {
				t.Fatal(err)
			}
			fields := map[string]any{}
			switch v := v.(type) {
			case []any: // RESP2: a flat list of pairs
				for i := 0; i+1 < len(v); i += 2 {
					fields[v[i].(string)] = v[i+1]
				}
			case map[any]any: // RESP3: a map
				for k, x := range v {
					fields[k.(string)] = x
				}
			default:
				t.Fatalf("DECODEID reply %T %v", v, v)
			}
			ms := fields["unix-ms"].(int64)
			if d := time.Since(time.UnixMilli(ms)); d < -time.Second || d > time.Minute {
				t.Fatalf("DECODEID time %d is %v from now", ms, d)
			}
			if fields["server-id"] != int64(2) || fields["time"] != time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") {
				t.Fatalf("DECODEID fields %v", fields)
			}

			if err := c.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if s, err := c.Echo(ctx, "hi").Result(); s != "hi" || err != nil {
				t.Fatalf("ECHO = %q, %v", s, err)
			}
			info, err := c.Info(ctx, "idgen").Result()
			if err != nil || !strings.Contains(info, "server_id:2\r\n") || !strings.Contains(info, "ids_issued:6\r\n") {
				t.Fatalf("INFO idgen = %q, %v", info, err)
			}
			cfg, err := c.ConfigGet(ctx, "appendonly").Result()
			if err != nil || cfg["appendonly"] != "no" {
				t.Fatalf("CONFIG GET appendonly = %v, %v", cfg, err)
			}
			if tm, err := c.Time(ctx).Result(); err != nil || time.Since(tm).Abs() > time.Minute {
				t.Fatalf("TIME = %v, %v", tm, err)
			}
		})
	}
}

// TestErrors checks error replies against Redis's wording, and that the
// connection keeps working after each.
func TestErrors(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, Options{MGetIDMax: 1000})
	c := dialRaw(t, addr)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"GETID", "x"}, "ERR wrong number of arguments for 'getid' command"},
		{[]string{"MGETID"}, "ERR wrong number of arguments for 'mgetid' command"},
		{[]string{"mgetid", "1", "2"}, "ERR wrong number of arguments for 'mgetid' command"},
		{[]string{"MGETID", "0"}, "ERR count 0 out of range, must be 1..1000 (mgetid-max)"},
		{[]string{"MGETID", "-1"}, "ERR count -1 out of range, must be 1..1000 (mgetid-max)"},
		{[]string{"MGETID", "1001"}, "ERR count 1001 out of range, must be 1..1000 (mgetid-max)"},
		{[]string{"MGETID", "abc"}, "ERR value is not an integer or out of range"},
		{[]string{"MGETID", "99999999999"}, "ERR count 99999999999 out of range, must be 1..1000 (mgetid-max)"},
		{[]string{"MGETID", "99999999999999999999"}, "ERR value is not an integer or out of range"},
		{[]string{"MGETID", "1.5"}, "ERR value is not an integer or out of range"},
		{[]string{"MGETID", ""}, "ERR value is not an integer or out of range"},
		{[]string{"DECODEID", "-5"}, "ERR invalid id: id -5 is negative"},
		{[]string{"DECODEID", "x"}, "ERR value is not an integer or out of range"},
		{[]string{"FOO", "a", "b"}, "ERR unknown command 'FOO', with args beginning with: 'a' 'b' "},
		{[]string{"FOO\r\nBAR"}, "ERR unknown command 'FOO  BAR', with args beginning with: "},
		{[]string{"SELECT", "1"}, "ERR DB index is out of range"},
		{[]string{"PING", "a", "b"}, "ERR wrong number of arguments for 'ping' command"},
		{[]string{"HELLO", "4"}, "NOPROTO unsupported protocol version"},
		{[]string{"AUTH", "pw"}, "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"},
		{[]string{"CLIENT", "PAUSE", "10"}, "ERR unknown subcommand 'PAUSE'. Try CLIENT HELP."},
		{[]string{"CLIENT", "KILL"}, "ERR wrong number of arguments for 'client|kill' command"},
		{[]string{"IDRANGE", "5", "4"}, "ERR the window starts after it ends (5 > 4)"},
		{[]string{"CONFIG", "SET", "port", "1"}, "ERR CONFIG SET is not supported: idserver reads its configuration at start ('port')"},
	}
	for _, tt := range tests {
		if got := c.do(tt.args...); got != respError(tt.want) {
			t.Errorf("%q: got %q, want error %q", tt.args, got, tt.want)
		}
		if got := c.do("PING"); got != "PONG" {
			t.Fatalf("PING after %q: %v", tt.args, got)
		}
	}
}

func TestPipelineInOrder(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, Options{})
	c := dialRaw(t, addr)
	var b strings.Builder
	const n = 300
	for i := range n {
		switch i % 3 {
		case 0:
			b.WriteString(encode("GETID"))
		case 1:
			b.WriteString(encode("ECHO", strconv.Itoa(i)))
		case 2:
			b.WriteString(encode("MGETID", "2"))
		}
	}
	c.send(b.String()) // one write: redcon sees one pipeline
	prev := int64(0)
	for i := range n {
		switch v := c.reply().(type) {
		case int64:
			if i%3 != 0 || v <= prev {
				t.Fatalf("reply %d: id %d after %d", i, v, prev)
			}
			prev = v
		case string:
			if i%3 != 1 || v != strconv.Itoa(i) {
				t.Fatalf("reply %d: %q", i, v)
			}
		case []any:
			for _, s := range v {
				id, _ := strconv.ParseInt(s.(string), 10, 64)
				if i%3 != 2 || id <= prev {
					t.Fatalf("reply %d: id %d after %d", i, id, prev)
				}
				prev = id
			}
		default:
			t.Fatalf("reply %d: %T %v", i, v, v)
		}
	}
}

func TestResp3AndAuth(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, Options{RequirePass: "s3cret"})
	c := dialRaw(t, addr)
	if got := c.do("GETID"); got != respError("NOAUTH Authentication required.") {
		t.Fatalf("GETID before AUTH: %v", got)
	}
	if got := c.do("HELLO", "3"); !strings.HasPrefix(fmt.Sprint(got), "NOAUTH HELLO must be called") {
		t.Fatalf("HELLO 3 before AUTH: %v", got)
	}
	if got := c.do("AUTH", "wrong"); got != respError("WRONGPASS invalid username-password pair or user is disabled.") {
		t.Fatalf("AUTH wrong: %v", got)
	}
	hello := c.do("HELLO", "3", "AUTH", "default", "s3cret", "SETNAME", "app")
	m, ok := hello.(map[string]any)
	if !ok || m["proto"] != int64(3) || m["server"] != "idserver" {
		t.Fatalf("HELLO 3 AUTH: %#v", hello)
	}
	if got := c.do("CLIENT", "GETNAME"); got != "app" {
		t.Fatalf("CLIENT GETNAME: %v", got)
	}
	if got, ok := c.do("GETID").(int64); !ok || got <= 0 {
		t.Fatalf("GETID after AUTH: %v", got)
	}
	d, ok := c.do("DECODEID", "1").(map[string]any)
	if !ok || !reflect.DeepEqual(d["shard"], int64(0)) || d["random"] != int64(1) {
		t.Fatalf("DECODEID in RESP3: %#v", d)
	}
	if got := c.do("HELLO", "2"); got.([]any)[5] != int64(2) {
		t.Fatalf("HELLO 2: %v", got)
	}
	c2 := dialRaw(t, addr)
	if got := c2.do("AUTH", "default", "s3cret"); got != "OK" {
		t.Fatalf("AUTH default pw: %v", got)
	}
	if got := c2.do("QUIT"); got != "OK" {
		t.Fatalf("QUIT: %v", got)
	}
	if _, err := c2.r.ReadByte(); err == nil {
		t.Fatal("connection open after QUIT")
	}
}

// TestConnectHandshakes sends what each common client sends on connect.
func TestConnectHandshakes(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, Options{Config: [][2]string{{"port", "6551"}}})
	c := dialRaw(t, addr)
	// redis-benchmark
	if got := c.do("CONFIG", "GET", "save"); !reflect.DeepEqual(got, []any{"save", ""}) {
		t.Fatalf("CONFIG GET save: %#v", got)
	}
	if got := c.do("CONFIG", "GET", "*"); len(got.([]any)) != 2*(1+len(redisConfig())) {
		t.Fatalf("CONFIG GET *: %#v", got)
	}
	// redis-cli interactive
	if got := c.do("COMMAND", "DOCS").([]any); len(got) != 2*len(table) || got[0] != "getid" {
		t.Fatalf("COMMAND DOCS: %d elements, want a name and docs for each of %d commands", len(got), len(table))
	}
	cmds := c.do("COMMAND").([]any)
	if len(cmds) != len(commands) || c.do("COMMAND", "COUNT") != int64(len(commands)) {
		t.Fatalf("COMMAND lists %d commands, table has %d", len(cmds), len(commands))
	}
	for _, e := range cmds {
		if e := e.([]any); len(e) != 10 || e[1] != int64(commands[e[0].(string)].arity) {
			t.Fatalf("COMMAND entry %#v", e)
		}
	}
	// go-redis, node-redis, ioredis
	if got := c.do("HELLO", "3").(map[string]any); got["version"] != RedisVersion {
		t.Fatalf("HELLO 3: %#v", got)
	}
	for _, kv := range [][2]string{{"LIB-NAME", "go-redis(,go1.26.8)"}, {"LIB-VER", "9.23.0"}} {
		if got := c.do("CLIENT", "SETINFO", kv[0], kv[1]); got != "OK" {
			t.Fatalf("CLIENT SETINFO %s: %v", kv[0], got)
		}
	}
	if got := string(c.do("INFO").(verbatim)); !strings.Contains(got, "# Idgen\r\n") || !strings.Contains(got, "redis_version:") {
		t.Fatalf("INFO: %q", got)
	}
	if got := c.do("SELECT", "0"); got != "OK" {
		t.Fatalf("SELECT 0: %v", got)
	}
}

// TestFourServersNoDuplicates runs server-ids 0..3 side by side with 50
// concurrent clients each and checks every ID they hand out is unique.
func TestFourServersNoDuplicates(t *testing.T) {
	const servers, clients, rounds = 4, 50, 40
	ctx := context.Background()
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	for sid := range servers {
		_, addr := startServer(t, idgen.Settings{ServerID: int64(sid)}, Options{})
		rc := newClient(t, addr, 2)
		for range clients {
			wg.Go(func() {
				local := make([]int64, 0, rounds*11)
				for i := range rounds {
					if i%2 == 0 {
						id, err := rc.Do(ctx, "GETID").Int64()
						if err != nil {
							t.Error(err)
							return
						}
						local = append(local, id)
						continue
					}
					ids, err := rc.Do(ctx, "MGETID", 20).Int64Slice()
					if err != nil {
						t.Error(err)
						return
					}
					local = append(local, ids...)
				}
				mu.Lock()
				defer mu.Unlock()
				for _, id := range local {
					if prev, dup := seen[id]; dup {
						t.Errorf("id %d from server %d already issued by server %d", id, sid, prev)
					}
					seen[id] = sid
				}
			})
		}
	}
	wg.Wait()
	if want := servers * clients * (rounds/2 + rounds/2*20); len(seen) != want {
		t.Fatalf("%d unique ids, want %d", len(seen), want)
	}
}

func TestMaxClients(t *testing.T) {
	s, addr := startServer(t, idgen.Settings{}, Options{ConnOptions: ConnOptions{MaxClients: 2}})
	a, b := dialRaw(t, addr), dialRaw(t, addr)
	a.do("PING")
	b.do("PING")
	c := dialRaw(t, addr)
	if got := c.reply(); got != respError("ERR max number of clients reached") {
		t.Fatalf("third client: %v", got)
	}
	if _, err := c.r.ReadByte(); err == nil {
		t.Fatal("refused client left open")
	}
	if got := a.do("GETID"); got.(int64) <= 0 {
		t.Fatalf("GETID on an accepted client: %v", got)
	}
	if s.Stats().Rejected != 1 {
		t.Fatalf("rejected_connections %d, want 1", s.Stats().Rejected)
	}
}

// TestLeadBoundReply checks the -BUSY reply for an MGETID that would run
// too far ahead of the clock, and that it is counted.
func TestLeadBoundReply(t *testing.T) {
	// The clock stands still, so that a busy machine cannot let it catch
	// up between the two requests.
	clk := idgentest.NewClock(time.Now())
	_, addr := startServer(t, idgen.Settings{MaxLead: 10 * time.Millisecond, MaxWait: -1, Clock: clk}, Options{})
	c := dialRaw(t, addr)
	// 512 IDs per ms: 5000 IDs borrow about 9ms ahead, the next 5000
	// would need about 19ms.
	c.send(encode("MGETID", "5000") + encode("MGETID", "5000"))
	checkIDs(t, c.reply(), 5000, 0)
	got := c.reply()
	e, ok := got.(respError)
	if !ok || !strings.HasPrefix(string(e), "BUSY lead ") || !strings.Contains(string(e), "exceed max-lead-ms 10") || !strings.Contains(string(e), "retry in ") {
		t.Fatalf("reply past the lead bound: %.200v", got)
	}
	// A batch that alone spans more than the bound can never be served:
	// an ERR, not a BUSY with a retry time.
	if e, ok := c.do("MGETID", "10000").(respError); !ok || !strings.HasPrefix(string(e), "ERR lead bound exceeded: ") || !strings.Contains(string(e), "ask for fewer") {
		t.Fatalf("MGETID spanning more than max-lead: %.200v", e)
	}
	info := c.do("INFO", "idgen").(string)
	if !strings.Contains(info, "lead_refusals:1\r\n") || !strings.Contains(info, "ids_issued:5000\r\n") {
		t.Fatalf("refusal not counted, or IDs issued: %q", info)
	}
	if id, ok := c.do("GETID").(int64); !ok || id <= 0 {
		t.Fatalf("GETID after a refusal: %v", id)
	}
}

// TestEndOfTimeFieldReply: at the end of the time field every request
// gets an ERR naming the date, in Redis's wording without Go's package
// prefix, and INFO shows the date beforehand.
func TestEndOfTimeFieldReply(t *testing.T) {
	end := idgen.End(idgen.DefaultEpoch)
	clk := idgentest.NewClock(end.Add(-time.Millisecond))
	_, addr := startServer(t, idgen.Settings{Clock: clk}, Options{})
	c := dialRaw(t, addr)
	info := c.do("INFO", "idgen").(string)
	if want := fmt.Sprintf("time_field_end_ms:%d\r\ntime_field_end:%s\r\n", end.UnixMilli(), end.UTC().Format(time.RFC3339)); !strings.Contains(info, want) {
		t.Fatalf("INFO idgen lacks %q:\n%s", want, info)
	}
	checkIDs(t, c.do("MGETID", "512"), 512, 0) // the last millisecond
	want := "ERR the 42-bit time field is used up: 1 more IDs would run past its end (" + end.UTC().Format(time.RFC3339) + ")"
	if e, ok := c.do("GETID").(respError); !ok || string(e) != want {
		t.Fatalf("GETID past the end: %q, want %q", e, want)
	}
}

// TestRedisCLI drives the server with redis-cli one-shot commands.
func TestRedisCLI(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{ServerID: 1}, Options{})
	host, port, _ := strings.Cut(addr, ":")
	cli := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("redis-cli", append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	id, err := strconv.ParseInt(cli("GETID"), 10, 64)
	if err != nil || id <= 0 {
		t.Fatalf("redis-cli GETID: %d, %v", id, err)
	}
	lines := strings.Fields(cli("MGETID", "3"))
	if len(lines) != 3 {
		t.Fatalf("redis-cli MGETID 3: %q", lines)
	}
	if out := cli("DECODEID", lines[2]); !strings.Contains(out, "server-id\n1\nshard\n") {
		t.Fatalf("redis-cli DECODEID: %q", out)
	}
	if out := cli("MGETID", "0"); !strings.Contains(out, "ERR count 0 out of range") {
		t.Fatalf("redis-cli MGETID 0: %q", out)
	}
	if out := cli("PING"); out != "PONG" {
		t.Fatalf("redis-cli PING: %q", out)
	}
}

// TestRedisBenchmark runs redis-benchmark with pipelining and many clients
// and checks every request was answered with an ID.
func TestRedisBenchmark(t *testing.T) {
	s, addr := startServer(t, idgen.Settings{MaxLead: time.Hour}, Options{})
	host, port, _ := strings.Cut(addr, ":")
	var issued uint64
	for _, run := range [][]string{
		{"-n", "100000", "-c", "50", "-P", "16"},
		{"-n", "20000", "-c", "200"},
	} {
		args := append([]string{"-h", host, "-p", port, "-q"}, run...)
		out, err := exec.Command("redis-benchmark", append(args, "GETID")...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "requests per second") || strings.Contains(string(out), "ERR") {
			t.Fatalf("redis-benchmark %v: %v\n%s", run, err, out)
		}
		n, _ := strconv.ParseUint(run[1], 10, 64)
		issued += n
		if got := s.opts.Generator.Stats().Issued; got != issued {
			t.Fatalf("after redis-benchmark %v: %d IDs issued, want %d", run, got, issued)
		}
	}
}

// TestRedisCLIInteractive runs redis-cli on a pseudo-terminal (via
// script(1)), so it starts its interactive mode and sends COMMAND DOCS and
// COMMAND first, as a person at a prompt would see it.
func TestRedisCLIInteractive(t *testing.T) {
	s, addr := startServer(t, idgen.Settings{}, Options{})
	host, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command("script", "-qec", "redis-cli -h "+host+" -p "+port, "/dev/null")
	// TERM=dumb: linenoise would otherwise ask the terminal for its cursor
	// position and wait for an answer no one sends.
	cmd.Env = append(os.Environ(), "TERM=dumb")
	cmd.Stdin = strings.NewReader("GETID\nMGETID 2\nDECODEID 1\nquit\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("interactive redis-cli: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{"(integer) ", `1) "`, `2) "`, `"server-id"`} {
		if !strings.Contains(text, want) {
			t.Fatalf("interactive redis-cli output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "ERR") {
		t.Fatalf("interactive redis-cli saw an error:\n%s", text)
	}
	if got := s.opts.Generator.Stats().Issued; got != 3 {
		t.Fatalf("%d IDs issued, want 3", got)
	}
	// Three ID commands (redis-cli handles quit itself) and COMMAND DOCS.
	if got := s.commands.Load(); got < 4 {
		t.Fatalf("%d commands processed, want the connect-time COMMAND DOCS too", got)
	}
}

func TestShutdownAndDebugPermissions(t *testing.T) {
	var calls atomic.Int32
	stop := func() { calls.Add(1) }
	t.Run("requirepass allows SHUTDOWN", func(t *testing.T) {
		_, addr := startServer(t, idgen.Settings{}, Options{RequirePass: "pw", Shutdown: stop})
		c := dialRaw(t, addr)
		if got := c.do("AUTH", "pw"); got != "OK" {
			t.Fatal(got)
		}
		c.send(encode("SHUTDOWN", "NOSAVE"))
		if got := c.do("DEBUG", "CLOCK-OFFSET"); !strings.HasPrefix(fmt.Sprint(got), "ERR DEBUG command not allowed") {
			t.Fatalf("DEBUG without enable-debug-command: %v", got)
		}
		if calls.Load() != 1 {
			t.Fatalf("Shutdown called %d times", calls.Load())
		}
	})
	t.Run("local allows loopback clients", func(t *testing.T) {
		s, addr := startServer(t, idgen.Settings{}, Options{EnableDebug: DebugLocal, Shutdown: stop})
		c := dialRaw(t, addr)
		if got := c.do("DEBUG", "CLOCK-OFFSET", "-250"); got != "OK" || s.opts.Generator.ClockOffset() != -250*time.Millisecond {
			t.Fatalf("DEBUG CLOCK-OFFSET -250 from loopback: %v, offset %v", got, s.opts.Generator.ClockOffset())
		}
		if got := c.do("SHUTDOWN", "ABORT"); got != respError("ERR No shutdown in progress.") {
			t.Fatalf("SHUTDOWN ABORT: %v", got)
		}
		if got := c.do("DEBUG", "SLEEP", "1"); got != respError("ERR unknown subcommand or wrong number of arguments for 'SLEEP'. Try DEBUG HELP.") {
			t.Fatalf("DEBUG SLEEP: %v", got)
		}
	})
	t.Run("neither refuses SHUTDOWN", func(t *testing.T) {
		_, addr := startServer(t, idgen.Settings{}, Options{Shutdown: stop})
		if got := dialRaw(t, addr).do("SHUTDOWN"); !strings.HasPrefix(fmt.Sprint(got), "ERR SHUTDOWN is not allowed") {
			t.Fatalf("SHUTDOWN: %v", got)
		}
	})
}

// TestGracefulShutdown: requests a client has sent before Shutdown are all
// answered, then the connection closes; new connections are refused.
func TestGracefulShutdown(t *testing.T) {
	s, addr := startServer(t, idgen.Settings{}, Options{})
	c := dialRaw(t, addr)
	var b strings.Builder
	for range 200 {
		b.WriteString(encode("MGETID", "50"))
	}
	c.send(b.String())
	first := c.reply() // the server has read the pipeline
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	n := 1
	for {
		v, err := readReply(c.r)
		if err != nil {
			break
		}
		if a, ok := v.([]any); !ok || len(a) != 50 {
			t.Fatalf("reply %d after shutdown: %.100v", n, v)
		}
		n++
	}
	if _, ok := first.([]any); !ok || n < 2 {
		t.Fatalf("%d replies; the requests read before Shutdown were not all answered", n)
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Fatal("new connection accepted after Shutdown")
	}
}

// TestStandbyAndSwitch: standing by, ID commands (in a transaction too)
// get the reason as their error reply and Ready reports it, while
// DECODEID and IDRANGE still answer; a new generator then issues with its
// own server-id, and INFO's counters add up over both generators.
func TestStandbyAndSwitch(t *testing.T) {
	l := idgen.Layout{IDBits: 1, ShardBits: 10, RandomBits: 10}
	s, addr := startServer(t, idgen.Settings{Layout: l, ServerID: 0}, Options{})
	c := dialRaw(t, addr)
	if ids, ok := c.do("MGETID", "3").([]any); !ok || len(ids) != 3 {
		t.Fatalf("MGETID 3: %v", ids)
	}
	why := errors.New("no server-id held: both are held by other servers")
	s.Standby(why)
	for _, cmd := range [][]string{{"GETID"}, {"MGETID", "2"}} {
		if got := c.do(cmd...); fmt.Sprint(got) != "CLUSTERDOWN "+why.Error() {
			t.Fatalf("%v standing by: %v, want %q", cmd, got, why)
		}
	}
	c.do("MULTI")
	c.do("GETID")
	if got := fmt.Sprint(c.do("EXEC")); !strings.Contains(got, "CLUSTERDOWN") {
		t.Fatalf("EXEC standing by: %v", got)
	}
	if err := s.Ready(); err == nil || !strings.Contains(err.Error(), "CLUSTERDOWN no server-id held") {
		t.Fatalf("Ready standing by: %v", err)
	}
	if info := fmt.Sprint(c.do("INFO", "idgen")); !strings.Contains(info, "server_id:-1\r\n") || !strings.Contains(info, "ids_issued:3\r\n") {
		t.Fatalf("INFO idgen standing by:\n%s", info)
	}
	if got, ok := c.do("IDRANGE", "1700000000000", "1700000000000").([]any); !ok || len(got) != 2 {
		t.Fatalf("IDRANGE standing by: %v", got)
	}

	g, err := idgen.New(idgen.Settings{Layout: l, ServerID: 1})
	if err != nil {
		t.Fatal(err)
	}
	s.SetGenerator(g)
	id, ok := c.do("GETID").(int64)
	if !ok {
		t.Fatalf("GETID after SetGenerator: %v", id)
	}
	if p, _ := idgen.Decode(id, l, idgen.DefaultEpoch); p.ServerID != 1 {
		t.Fatalf("GETID after SetGenerator: server-id %d, want 1", p.ServerID)
	}
	if info := fmt.Sprint(c.do("INFO", "idgen")); !strings.Contains(info, "server_id:1\r\n") || !strings.Contains(info, "ids_issued:4\r\n") {
		t.Fatalf("INFO idgen after SetGenerator:\n%s", info)
	}
}
