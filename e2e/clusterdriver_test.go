package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/valkey-io/valkey-go"
)

// The cluster driver protocol: how a cluster client of another language
// takes part in TestRedisClusterOverEtcd's load, its replies checked by
// the same oracle (opLog.check) as the Go clients'. Every driver follows
// it; clients/python/clusterdriver.py and clients/node/clusterdriver.js
// are examples.
//
// A driver is a program started with these environment variables:
//
//	IDSERVER_SEED=host:port  one node's address; the client finds the rest
//	IDSERVER_KEYS=N          the keys are k0 .. k{N-1}, the Go load's own:
//	                         every client contends on the same keys
//	IDSERVER_OUT=path        the file it writes its replies to
//	IDSERVER_WORKERS=4       how many requests it keeps in flight
//
// It runs until its stdin reaches end of file (the test closes the pipe;
// a test that died closes it too), then flushes the file and exits 0.
// Each worker loops: mostly INCR of a random key; 1 in 8 GETID; 1 in 8
// MGETID 5. On an error it writes an err line, sleeps about 10 ms and
// goes on: the client's own retries and failover do the rest, and no
// error ends the driver. It uses its client on its defaults as far as it
// can, and says in a comment what it had to change and why.
//
// The output has one line per reply, fields separated by one space:
//
//	incr <key> <sent_ns> <recv_ns> <value>
//	id <sent_ns> <recv_ns> <id>                    one line per ID: MGETID makes several
//	err <cmd> <sent_ns> <recv_ns> <message>        the message may hold spaces, not newlines
//
// Times are wall-clock nanoseconds since the Unix epoch, taken just before
// the request is sent and just after its reply came. A clock coarser than
// a nanosecond rounds sent down and recv up (the driver says how), or the
// real-time check could blame the server for the client's clock: a value
// must be above every value of its key whose reply was received before
// its request was sent. IDs are written exactly as 64-bit integers (in
// JavaScript: strings or BigInt, never Number); a reply that cannot be
// written exactly is an err line whose message begins "inexact".
//
// The test fails if a driver exits non-zero, writes a line it cannot
// read, or has no INCR answered.

// A driver is a running cluster driver.
type driver struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    string
	stderr lockedBuffer
	done   chan error // its exit, once
	exit   error
	ended  bool
}

// startDriver runs argv in dir as the driver name, its client given seed,
// and stops it when the test ends if the test did not.
func startDriver(t *testing.T, name, dir, seed string, keys int, argv ...string) *driver {
	t.Helper()
	d := &driver{name: name, out: filepath.Join(t.TempDir(), "ops"), done: make(chan error, 1)}
	d.cmd = exec.Command(argv[0], argv[1:]...)
	d.cmd.Dir = dir
	d.cmd.Env = append(os.Environ(), "IDSERVER_SEED="+seed, "IDSERVER_KEYS="+strconv.Itoa(keys), "IDSERVER_OUT="+d.out, "IDSERVER_WORKERS=4")
	d.cmd.Stdout, d.cmd.Stderr = &d.stderr, &d.stderr
	var err error
	if d.stdin, err = d.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() { d.stop() })
	return d
}

// lockedBuffer is a driver's output, read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// stop closes the driver's stdin and waits for it to exit, 30 s at most
// (then kills it), and returns why it failed, nil if it exited 0.
func (d *driver) stop() error {
	if !d.ended {
		d.ended = true
		d.stdin.Close()
		select {
		case d.exit = <-d.done:
		case <-time.After(30 * time.Second):
			d.cmd.Process.Kill()
			<-d.done
			d.exit = errors.New("still running 30 s after its stdin closed")
		}
	}
	if d.exit != nil {
		return fmt.Errorf("%s: %v\n%s", d.name, d.exit, d.stderr.String())
	}
	return nil
}

// answered reports whether the driver has written an INCR's reply.
func (d *driver) answered() bool {
	b, _ := os.ReadFile(d.out)
	return bytes.HasPrefix(b, []byte("incr ")) || bytes.Contains(b, []byte("\nincr "))
}

// read adds the driver's replies and errors to log.
func (d *driver) read(log *opLog) error {
	f, err := os.Open(d.out)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if err := log.parse(d.name, sc.Text()); err != nil {
			return fmt.Errorf("%s: %s line %d: %v", d.name, d.out, n, err)
		}
	}
	return sc.Err()
}

// parse adds one line of a driver's output to l.
func (l *opLog) parse(client, line string) error {
	f := strings.SplitN(line, " ", 5)
	ints := func(fields ...string) ([]int64, error) {
		var vs []int64
		for _, s := range fields {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, err
			}
			vs = append(vs, v)
		}
		return vs, nil
	}
	var o op
	switch {
	case f[0] == "incr" && len(f) == 5:
		vs, err := ints(f[2:]...)
		if err != nil {
			return err
		}
		o = op{client: client, key: f[1], sent: vs[0], recv: vs[1], value: vs[2]}
	case f[0] == "id" && len(f) == 4:
		vs, err := ints(f[1:]...)
		if err != nil {
			return err
		}
		o = op{client: client, sent: vs[0], recv: vs[1], value: vs[2]}
	case f[0] == "err" && len(f) == 5:
		if _, err := ints(f[2:4]...); err != nil {
			return err
		}
		l.fail(client, f[4])
		return nil
	default:
		return fmt.Errorf("not a reply: %q", line)
	}
	if o.recv < o.sent {
		return fmt.Errorf("received before it was sent: %q", line)
	}
	l.add(o)
	return nil
}

// clusterCalls is an in-process cluster client's way of sending INCR
// (incr) and GETID (ids(1)) or MGETID n (ids(n)).
type clusterCalls struct {
	incr func(ctx context.Context, key string) (int64, error)
	ids  func(ctx context.Context, n int) ([]int64, error)
}

// clusterLoad sends c a driver's worker mix until stop, INCRs of random
// keys of keys and GETIDs and MGETIDs, into log as client: an in-process
// driver.
func clusterLoad(client string, c clusterCalls, log *opLog, rnd *rand.Rand, keys int, stop <-chan struct{}) {
	ctx := context.Background()
	for {
		select {
		case <-stop:
			return
		default:
		}
		n, key := 0, fmt.Sprintf("k%d", rnd.IntN(keys)) // n IDs asked, 0 for INCR
		switch rnd.IntN(8) {
		case 0:
			n = 1
		case 1:
			n = 5
		}
		sent := time.Now()
		var v int64
		var ids []int64
		var err error
		if n == 0 {
			v, err = c.incr(ctx, key)
		} else {
			ids, err = c.ids(ctx, n)
		}
		recv := time.Now()
		if err != nil {
			log.fail(client, err.Error())
			if errors.Is(err, redis.ErrClosed) || errors.Is(err, rueidis.ErrClosing) || errors.Is(err, valkey.ErrClosing) {
				return
			}
			time.Sleep(10 * time.Millisecond) // a client's own pace after an error
			continue
		}
		if n == 0 {
			log.add(op{client: client, key: key, value: v, sent: sent.UnixNano(), recv: recv.UnixNano()})
		}
		for _, id := range ids {
			log.add(op{client: client, value: id, sent: sent.UnixNano(), recv: recv.UnixNano()})
		}
	}
}

// goRedisCluster is a go-redis cluster client given addr.
func goRedisCluster(addr string) (clusterCalls, func()) {
	// go-redis reads the slots again every ClusterStateReloadInterval (60
	// s by default) or on a MOVED: a client whose map sends a slot to a
	// server gone (killed, stopped or paused: its port takes connections
	// nobody answers until it is back) errs on it until then, or until
	// the server serves again. 5 s keeps the test short;
	// the figures on defaults are in docs/cluster.md.
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, ReadTimeout: time.Second, WriteTimeout: time.Second,
		ClusterStateReloadInterval: 5 * time.Second})
	return goRedisCalls(c), func() { c.Close() }
}

// goRedisCalls are the calls of clusterLoad by go-redis client c, a
// cluster client or a plain one.
func goRedisCalls(c redis.UniversalClient) clusterCalls {
	return clusterCalls{
		incr: func(ctx context.Context, key string) (int64, error) { return c.Incr(ctx, key).Result() },
		ids: func(ctx context.Context, n int) ([]int64, error) {
			if n == 1 {
				id, err := c.Do(ctx, "GETID").Int64()
				return []int64{id}, err
			}
			return c.Do(ctx, "MGETID", n).Int64Slice()
		},
	}
}

// rueidisCluster is a rueidis client on its defaults given addr: it finds
// the cluster from CLUSTER SLOTS.
func rueidisCluster(addr string) (clusterCalls, func(), error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		return clusterCalls{}, nil, err
	}
	return clusterCalls{
		incr: func(ctx context.Context, key string) (int64, error) {
			return c.Do(ctx, c.B().Incr().Key(key).Build()).AsInt64()
		},
		ids: func(ctx context.Context, n int) ([]int64, error) {
			if n == 1 {
				id, err := c.Do(ctx, c.B().Arbitrary("GETID").Build()).AsInt64()
				return []int64{id}, err
			}
			return c.Do(ctx, c.B().Arbitrary("MGETID").Args(strconv.Itoa(n)).Build()).AsIntSlice()
		},
	}, c.Close, nil
}

// valkeyGoCluster is valkey-go (rueidis's fork, for Valkey) on its
// defaults given addr, as rueidisCluster.
func valkeyGoCluster(addr string) (clusterCalls, func(), error) {
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		return clusterCalls{}, nil, err
	}
	return clusterCalls{
		incr: func(ctx context.Context, key string) (int64, error) {
			return c.Do(ctx, c.B().Incr().Key(key).Build()).AsInt64()
		},
		ids: func(ctx context.Context, n int) ([]int64, error) {
			if n == 1 {
				id, err := c.Do(ctx, c.B().Arbitrary("GETID").Build()).AsInt64()
				return []int64{id}, err
			}
			return c.Do(ctx, c.B().Arbitrary("MGETID").Args(strconv.Itoa(n)).Build()).AsIntSlice()
		},
	}, c.Close, nil
}

// driverCommands are the drivers of other languages TestRedisClusterOverEtcd
// runs: each name, its directory (from e2e) and command.
var driverCommands = []struct {
	name, dir string
	argv      []string
}{
	{"redis-py", "../clients/python", []string{systemPython, "clusterdriver.py"}},
	{"ioredis", "../clients/node", []string{"node", "clusterdriver.js", "ioredis"}},
	{"node-redis", "../clients/node", []string{"node", "clusterdriver.js", "redis"}},
	{"glide", "../clients/node", []string{"node", "clusterdriver.js", "glide"}},
	{"jedis", "../clients/java", []string{"java", "-jar", javaJar, "load", "jedis"}},
	{"lettuce", "../clients/java", []string{"java", "-jar", javaJar, "load", "lettuce"}},
}

// javaJar is the Java clients' jar, from clients/java (mvn package, which
// scripts/test.sh runs).
const javaJar = "target/idserver-clients.jar"

// systemPython is the interpreter that sees Debian's python3-redis (the
// client matrix's redis-py 4.3.4); the python3 first on PATH may be
// another build without it.
const systemPython = "/usr/bin/python3"

// needDrivers skips t unless the drivers' languages and clients are
// installed, or fails it under CI=true, where scripts/test.sh installs
// them.
func needDrivers(t *testing.T) {
	t.Helper()
	var missing []string
	if exec.Command(systemPython, "-c", "from redis.cluster import RedisCluster").Run() != nil {
		missing = append(missing, systemPython+" with redis-py's RedisCluster (apt-get install python3-redis)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node (apt-get install nodejs npm)")
	}
	for _, m := range []string{"ioredis", "redis", "@valkey/valkey-glide"} {
		if _, err := os.Stat(filepath.Join("../clients/node/node_modules", m, "package.json")); err != nil {
			missing = append(missing, "clients/node/node_modules/"+m+" (npm ci in clients/node)")
		}
	}
	if _, err := os.Stat(filepath.Join("../clients/java", javaJar)); err != nil {
		missing = append(missing, "clients/java/"+javaJar+" (mvn -q package in clients/java)")
	}
	if len(missing) == 0 {
		return
	}
	msg := "the cluster drivers need " + strings.Join(missing, ", ") + "; scripts/test.sh installs them"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
