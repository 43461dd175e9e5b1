// Package conf loads idserver's configuration: defaults, a redis.conf-style
// file, IDSERVER_* environment variables, then command-line flags, with one
// Validate that names the key and the allowed range.
//
// Every key is declared once, as a tagged field of Config; the tags drive
// the defaults, the flags, the environment names, CONFIG GET and the check
// that redis.conf.example documents every key.
package conf

import (
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/publicid"
)

// Config is idserver's effective configuration. A field's key tag is its
// name in the file, as a flag (--key) and, upper-cased with '_' for '-' and
// prefixed with IDSERVER_, in the environment.
type Config struct {
	Bind Bind `key:"bind" default:"127.0.0.1" usage:"addresses to listen on, for port and tls-port, space-separated as in Redis (127.0.0.1 ::1): IP addresses, * (every IPv4 address), ::* (every IPv6 address); a leading - skips one this machine does not have"`
	Port int  `key:"port" default:"6551" usage:"TCP port; 0 = no plain TCP (tls-port only)"`

	ProtectedMode  YesNo   `key:"protected-mode" default:"yes" usage:"yes: while requirepass is empty, serve only loopback clients (others get -DENIED), as Redis does; no: serve anyone"`
	TLSPort        int     `key:"tls-port" default:"0" usage:"TLS port; 0 = no TLS"`
	TLSCertFile    string  `key:"tls-cert-file" default:"" usage:"the server's certificate chain (PEM), for tls-port"`
	TLSKeyFile     string  `key:"tls-key-file" default:"" usage:"the private key of tls-cert-file (PEM)"`
	TLSCACertFile  string  `key:"tls-ca-cert-file" default:"" usage:"CA certificates (PEM) that client certificates must chain to"`
	TLSAuthClients TLSAuth `key:"tls-auth-clients" default:"yes" usage:"yes: TLS clients must present a certificate from tls-ca-cert-file; optional: checked if presented; no: not asked for"`

	ServerID    int   `key:"server-id" default:"0" usage:"this server's id, 0 .. 2^id-range - 1"`
	IDRange     int   `key:"id-range" default:"2" usage:"bits of the server-id field"`
	ShardRange  int   `key:"shard-range" default:"9" usage:"bits of the shard field (IDs per ms = 2^shard-range)"`
	RandomRange int   `key:"random-range" default:"10" usage:"bits of the random field"`
	EpochMs     int64 `key:"epoch" default:"1420041600000" usage:"epoch of the time field, unix milliseconds"`

	MaxLead Millis `key:"max-lead-ms" default:"5000" usage:"how far IDs may run ahead of the clock"`
	MaxWait Millis `key:"max-wait-ms" default:"100" usage:"how long a request may wait for the clock before -BUSY; 0 = never wait"`

	GoMaxProcs int `key:"gomaxprocs" default:"1" usage:"CPU cores the server runs on (GOMAXPROCS), and its number of event loops; 0 = all"`

	MGetIDMax               int         `key:"mgetid-max" default:"10000" usage:"largest MGETID count"`
	GetIDReply              GetIDReply  `key:"getid-reply" default:"auto" usage:"GETID's reply: auto (a bulk string to JavaScript clients: those that announce ioredis, iovalkey, node-redis or GlideJS with CLIENT SETINFO, or begin with the lowercase info ready check of older ioredis and node-redis; an integer to others), integer, or string"`
	MaxClients              int         `key:"maxclients" default:"10000" usage:"most clients connected at once"`
	Timeout                 Seconds     `key:"timeout" default:"0" usage:"close a client idle this many seconds; 0 = never"`
	ProtoMaxBulkLen         Size        `key:"proto-max-bulk-len" default:"64kb" usage:"largest bulk string or inline command a client may send"`
	ProtoMaxMultibulkLen    int         `key:"proto-max-multibulk-len" default:"1024" usage:"most arguments in one command"`
	ClientQueryBufferLimit  Size        `key:"client-query-buffer-limit" default:"1mb" usage:"most bytes a client's input may hold in the server: an unfinished command, and commands waiting behind one that waits; past it, the client is closed"`
	MaxMemoryClients        Size        `key:"maxmemory-clients" default:"64mb" usage:"most bytes all clients together may have the server hold (input, replies, transactions); past it, the clients holding the most are closed; the Go runtime's memory limit, unless GOMEMLIMIT is set, is {memory-limit}, and RSS stays under that plus 96mb (docs/sequences.md); 0 = no bound"`
	ClientOutputBufferLimit OutputLimit `key:"client-output-buffer-limit" default:"normal 16mb 8mb 60" usage:"normal <hard> <soft> <soft-seconds>: past soft, a client's commands wait until its replies drain; past hard (replies plus waiting requests), or soft for soft-seconds, it is closed; 0 = no limit"`
	RequirePass             string      `key:"requirepass" default:"" usage:"password clients must AUTH with; empty = none"`

	PublicIDKey       string `key:"public-id-key" default:"" secret:"yes" usage:"PUBLICID and PRIVATEID: an AES key of 32, 48 or 64 hex digits (AES-128, -192, -256): public strings go through FF1 and show neither order nor count; empty = plain Sqids (decodable by anyone). Set it once: a new key changes every public string"`
	PublicIDAlphabet  string `key:"public-id-alphabet" default:"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" usage:"PUBLICID's alphabet: at least 3 unique printable ASCII characters, 16 with public-id-key"`
	PublicIDMinLength int    `key:"public-id-min-length" default:"0" usage:"PUBLICID's shortest string, 0..20 (padded up to it)"`

	Dir          string `key:"dir" default:"." usage:"directory of the server's files: the ID reservation (state-file), the sequences (seq-file), their lock, and in cluster mode its copies of what it took from etcd; keep it: on an empty dir IDs start max-lead-ms ahead, but in single-server mode every sequence restarts at 1 and hands out its numbers again"`
	StateFile    string `key:"state-file" default:"idserver.state" usage:"file name of the durable ID reservation, in dir"`
	ReserveAhead Millis `key:"reserve-ms" default:"3000" usage:"how far ahead IDs are reserved on disk"`

	SeqFile        string `key:"seq-file" default:"idserver.seq" usage:"file name of the sequences' store (INCR), in dir; single-server mode"`
	SeqMaxKeys     int    `key:"seq-max-keys" default:"1000000" usage:"most sequences; past it, INCR of a new key is refused (existing keys keep working)"`
	SeqMaxKeyBytes int    `key:"seq-max-key-bytes" default:"512" usage:"longest sequence key, bytes"`
	SeqMaxIncrBy   int64  `key:"seq-max-incrby" default:"1000000" usage:"largest INCRBY increment"`
	SeqSegment     Millis `key:"seq-segment-ms" default:"3000" usage:"how much of a key's traffic one write reserves: a busy key is written about every seq-segment-ms/2, and a crash skips at most one segment, about that much of its busiest recent traffic"`
	SeqMaxSegment  int64  `key:"seq-max-segment" default:"1000000" usage:"most values one write reserves for a key (but for one larger INCRBY): the most a crash skips of a key"`

	EnableDebugCommand DebugCommand `key:"enable-debug-command" default:"no" usage:"allow DEBUG and SHUTDOWN: no, yes, or local (loopback clients only)"`
	DebugClockOffset   Millis       `key:"debug-clock-offset-ms" default:"0" usage:"start with the clock shifted (tests; needs enable-debug-command)"`

	EtcdEndpoints   string  `key:"etcd-endpoints" default:"" usage:"cluster mode: etcd endpoints (comma list) to claim a server-id from; empty = single-server mode (server-id and the state file)"`
	EtcdPrefix      string  `key:"etcd-prefix" default:"/idserver/" usage:"cluster mode: the etcd key prefix of this site's servers"`
	EtcdLeaseTTL    Seconds `key:"etcd-lease-ttl" default:"5" usage:"cluster mode: TTL of the lease a claim is bound to: a dead server's id frees this long after it stops, its hash slots 2 s later; 5: twice the longest etcd leader election measured (1-2.4 s), which a lease must outlive"`
	EtcdDialTimeout Seconds `key:"etcd-dial-timeout" default:"5" usage:"cluster mode: timeout of etcd requests"`
	EtcdCertFile    string  `key:"etcd-cert-file" default:"" usage:"cluster mode: client certificate (PEM) for etcd over TLS"`
	EtcdKeyFile     string  `key:"etcd-key-file" default:"" usage:"cluster mode: the private key of etcd-cert-file (PEM)"`
	EtcdCACertFile  string  `key:"etcd-ca-cert-file" default:"" usage:"cluster mode: CA certificates (PEM) to check etcd's; set to use TLS"`
	EtcdUsername    string  `key:"etcd-username" default:"" usage:"cluster mode: etcd user"`
	EtcdPassword    string  `key:"etcd-password" default:"" secret:"yes" usage:"cluster mode: the etcd user's password"`

	ClusterEnabled          YesNo  `key:"cluster-enabled" default:"no" usage:"yes: answer as a Redis Cluster node (CLUSTER SLOTS, SHARDS, NODES, INFO, MYID, KEYSLOT; -MOVED, -TRYAGAIN and -CROSSSLOT for keys), so that cluster clients connect; with etcd-endpoints the slots are divided among the servers holding a server-id (docs/cluster.md); without, a cluster of one node owning every slot"`
	ClusterAnnounceIP       string `key:"cluster-announce-ip" default:"" usage:"cluster-enabled: the address clients are told to reach this node at; empty = the first address bound, or, bound to every address, none (clients use the one they reached)"`
	ClusterAnnouncePort     int    `key:"cluster-announce-port" default:"0" usage:"cluster-enabled: the plain port clients are told; 0 = port"`
	ClusterAnnounceTLSPort  int    `key:"cluster-announce-tls-port" default:"0" usage:"cluster-enabled: the TLS port clients are told; 0 = tls-port"`
	ClusterPort             int    `key:"cluster-port" default:"0" usage:"cluster mode: the port the other servers reach this one on (handovers' pulls of keys, forwarded commands; Redis's cluster bus), on every address of bind, with connections of its own apart from maxclients, so that clients filling port keep no server out; 0 = a port the kernel chooses, announced through etcd (set one to firewall it: only the servers need it)"`
	TLSCluster              YesNo  `key:"tls-cluster" default:"no" usage:"cluster mode: yes: cluster-port speaks TLS with tls-cert-file, and admits only servers presenting a certificate tls-ca-cert-file signed; this server reaches the others' over TLS the same way (Redis's tls-cluster); the same on every server"`
	ClusterAnnounceBusPort  int    `key:"cluster-announce-bus-port" default:"0" usage:"cluster mode: the cluster-port the other servers are told (behind NAT or a container's port mapping); 0 = cluster-port"`
	ClusterAnnounceHostname string `key:"cluster-announce-hostname" default:"" usage:"cluster-enabled: the hostname CLUSTER SLOTS, SHARDS and NODES show beside the address; empty = none"`

	LogLevel          LogLevel `key:"loglevel" default:"notice" usage:"debug, verbose, notice or warning"`
	MetricsAddr       string   `key:"metrics-addr" default:"" usage:"address for Prometheus metrics; empty = off"`
	MetricsMaxClients int      `key:"metrics-maxclients" default:"16" usage:"most HTTP connections open at once on metrics-addr; more wait in the listen backlog"`
	MetricsTimeout    Seconds  `key:"metrics-timeout" default:"10" usage:"seconds an HTTP connection on metrics-addr may take to send a request, or stay idle between requests, before it is closed"`
	MetricsPprof      YesNo    `key:"metrics-pprof" default:"no" usage:"yes: serve profiles and execution traces at /debug/pprof/ on metrics-addr (go tool pprof, go tool trace), to whoever reaches it: no authentication"`

	// File is the config file that was read, "" if none.
	File string
	// CheckReady is --check-ready: probe the running server's /readyz at
	// metrics-addr instead of starting one.
	CheckReady bool
	// CheckConfig is --check-config: report whether the configuration is
	// valid instead of starting, as nginx -t.
	CheckConfig bool
	// ServerIDSet is whether server-id was given (file, environment or
	// flag), not defaulted: in cluster mode it pins the claim.
	ServerIDSet bool
}

// OutputLimit is client-output-buffer-limit for normal clients, written as
// in redis.conf: "normal <hard> <soft> <soft-seconds>", the sizes in bytes
// or with Redis's units (8mb). Unlike Redis, which closes a client at its
// soft limit, idserver holds it there: its commands wait until its replies
// drain (backpressure).
type OutputLimit struct {
	Hard        int64         // unsent replies plus waiting requests past which a client is closed; 0: none
	Soft        int64         // unsent replies at which a client's commands wait; 0: none
	SoftSeconds time.Duration // how long a client may stay at Soft before it is closed; 0: for ever
}

// UnmarshalText parses the redis.conf form. Only the normal class applies:
// idserver has no replicas and no pub/sub.
func (l *OutputLimit) UnmarshalText(text []byte) error {
	w := strings.Fields(string(text))
	if len(w) != 4 || !strings.EqualFold(w[0], "normal") {
		return errors.New("want normal <hard> <soft> <soft-seconds> (only the normal class applies to idserver)")
	}
	hard, err := parseNumber(w[1], true)
	if err != nil {
		return fmt.Errorf("hard limit: %w", err)
	}
	soft, err := parseNumber(w[2], true)
	if err != nil {
		return fmt.Errorf("soft limit: %w", err)
	}
	secs, err := parseNumber(w[3], false)
	if err != nil {
		return fmt.Errorf("soft seconds: %w", err)
	}
	if hard < 0 || soft < 0 || secs < 0 || secs > 31_536_000 {
		return errors.New("limits must be 0 or more, and soft seconds at most a year")
	}
	*l = OutputLimit{Hard: hard, Soft: soft, SoftSeconds: time.Duration(secs) * time.Second}
	return nil
}

// String is the form CONFIG GET shows, with the sizes in bytes, as Redis
// shows them.
func (l OutputLimit) String() string {
	return fmt.Sprintf("normal %d %d %d", l.Hard, l.Soft, int64(l.SoftSeconds/time.Second))
}

// field is one key of Config, read from its tags.
type field struct {
	key, def, usage string
	index           int
	typ             reflect.Type
	secret          bool // CONFIG GET does not show it (requirepass, as in Redis, it does)
}

// words reports whether the key's value is several words in the file
// (client-output-buffer-limit normal 16mb 8mb 60, bind 127.0.0.1 ::1).
func (f field) words() bool {
	return f.typ == reflect.TypeFor[OutputLimit]() || f.typ == reflect.TypeFor[Bind]()
}

// helpType names the field's kind in --help. The names are not pflag's
// own ("int"): viper would convert such flags itself.
func (f field) helpType() string {
	switch f.typ {
	case reflect.TypeFor[Millis]():
		return "ms"
	case reflect.TypeFor[Seconds]():
		return "s"
	case reflect.TypeFor[Size]():
		return "size"
	case reflect.TypeFor[OutputLimit]():
		return "limits"
	case reflect.TypeFor[Bind]():
		return "addresses"
	}
	if names, ok := choices[f.typ.Name()]; ok {
		return strings.Join(names, "|")
	}
	if f.typ.Kind() == reflect.String {
		return "string"
	}
	return "integer"
}

// flagValue holds a flag's text as given: every source of a value (file,
// environment, flag) is converted by the same code, Unmarshal's.
type flagValue struct{ s, typ string }

func (v *flagValue) String() string     { return v.s }
func (v *flagValue) Set(s string) error { v.s = s; return nil }
func (v *flagValue) Type() string       { return v.typ }

// fields lists Config's keys in declaration order.
var fields = func() []field {
	var fs []field
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		if key, ok := f.Tag.Lookup("key"); ok {
			usage := strings.ReplaceAll(f.Tag.Get("usage"), "{memory-limit}", MemoryLimitRule)
			fs = append(fs, field{key, f.Tag.Get("default"), usage, i, f.Type, f.Tag.Get("secret") == "yes"})
		}
	}
	return fs
}()

// Keys returns every configuration key, in the order of redis.conf.example.
func Keys() []string {
	keys := make([]string, len(fields))
	for i, f := range fields {
		keys[i] = f.key
	}
	return keys
}

// lookup returns the field of a key.
func lookup(name string) (field, bool) {
	for _, f := range fields {
		if f.key == name {
			return f, true
		}
	}
	return field{}, false
}

// envPrefix starts the environment variables that override keys:
// IDSERVER_MGETID_MAX for mgetid-max.
const envPrefix = "IDSERVER_"

// envName is the environment variable of key.
func envName(key string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(key, "-", "_"))
}

// fromEnv returns the keys the IDSERVER_* variables of environ (as
// os.Environ) set. It refuses a variable that names no key, as the file
// refuses an unknown key: a misspelt override would otherwise be ignored
// silently.
func fromEnv(environ []string) (map[string]any, error) {
	values := map[string]any{}
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) {
			continue
		}
		key := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, envPrefix), "_", "-"))
		if _, ok := lookup(key); !ok {
			return nil, unknownVariable(name, key)
		}
		values[key] = value
	}
	return values, nil
}

// ErrVersion is returned by Load for --version: print the version and
// exit.
var ErrVersion = errors.New("conf: --version")

// Load builds the Config from args (as os.Args[1:]) and environ (as
// os.Environ()): defaults, then the file (--config path, or a sole
// positional argument as redis-server takes it), then IDSERVER_*
// variables, then flags. It returns an error wrapping pflag.ErrHelp after
// printing usage for --help.
func Load(args, environ []string) (*Config, error) {
	fs := pflag.NewFlagSet("idserver", pflag.ContinueOnError)
	fs.SortFlags = false
	file := fs.String("config", "", "redis.conf-style file to read")
	showVersion := fs.Bool("version", false, "print the version, commit and Go version, and exit")
	checkReady := fs.Bool("check-ready", false, "ask the server this configuration describes whether it is ready (GET /readyz at metrics-addr): exit 0 if so, 1 if not; for container health checks")
	checkConfig := fs.Bool("check-config", false, "check the configuration (file, environment, flags, and the TLS files it names) as a start would, print \"configuration OK\" or the error, and exit 0 or 1; nothing is written, locked, bound or dialled")
	for _, f := range fields {
		fs.Var(&flagValue{s: f.def, typ: f.helpType()}, f.key, f.usage)
		fs.Lookup(f.key).DefValue = f.def
	}
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: idserver [config-file] [--key value ...]\n\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("command line: %w%s", err, flagHint(fs, err))
	}
	if *showVersion {
		return nil, ErrVersion
	}
	switch rest := fs.Args(); {
	case len(rest) == 1 && *file == "":
		*file = rest[0]
	case len(rest) > 0:
		return nil, fmt.Errorf("command line: unexpected arguments %q (one config file, then --key value flags)", rest)
	}
	v, err := layers(fs, *file, environ)
	if err != nil {
		return nil, err
	}
	c := &Config{File: *file, CheckReady: *checkReady, CheckConfig: *checkConfig, ServerIDSet: v.IsSet("server-id")}
	if err := v.Unmarshal(c, decodeWith); err != nil {
		return nil, invalid(err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// layers is viper holding every source, highest first: the flags fs
// parsed, the environment, the file, the defaults. server-id has no
// default there, only its flag's: so IsSet tells whether it was given,
// which pins a claim in cluster mode.
func layers(fs *pflag.FlagSet, file string, environ []string) (*viper.Viper, error) {
	v := viper.New()
	for _, f := range fields {
		if f.key != "server-id" {
			v.SetDefault(f.key, f.def)
		}
	}
	if file != "" {
		values, err := ReadFile(file)
		if err != nil {
			return nil, err
		}
		if err := v.MergeConfigMap(toAny(values)); err != nil {
			return nil, fmt.Errorf("read config %s: %w", file, err)
		}
	}
	env, err := fromEnv(environ)
	if err != nil {
		return nil, err
	}
	if err := v.MergeConfigMap(env); err != nil { // over the file's values
		return nil, fmt.Errorf("environment: %w", err)
	}
	for _, f := range fields {
		if err := v.BindPFlag(f.key, fs.Lookup(f.key)); err != nil {
			return nil, fmt.Errorf("flag --%s: %w", f.key, err)
		}
	}
	return v, nil
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// decodeWith has Unmarshal read the key tags, and every value, text from
// any source, by its field's type (decode).
func decodeWith(dc *mapstructure.DecoderConfig) {
	dc.TagName = "key"
	dc.DecodeHook = decode
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// decode parses text into a field of Config's own types (each a
// TextUnmarshaler) or an integer (parseNumber); its errors quote the
// text.
func decode(from, to reflect.Type, data any) (any, error) {
	s, ok := data.(string)
	switch {
	case !ok:
		return data, nil
	case reflect.PointerTo(to).Implements(textUnmarshaler):
		v := reflect.New(to)
		if err := v.Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		return v.Elem().Interface(), nil
	case to.Kind() >= reflect.Int && to.Kind() <= reflect.Int64:
		n, err := parseNumber(s, false)
		if err == nil && reflect.New(to).Elem().OverflowInt(n) {
			err = errors.New("out of range")
		}
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		return n, nil
	}
	return data, nil
}

// invalid words a decoding error as Validate's: the key, the value given,
// and what is wrong with it.
func invalid(err error) error {
	var de *mapstructure.DecodeError
	if !errors.As(err, &de) {
		return fmt.Errorf("invalid config: %w", err)
	}
	return fmt.Errorf("invalid config: %s %w", de.Name(), de.Unwrap())
}

// Validate reports the first invalid key: one line naming the key, its
// value and the allowed range.
func (c *Config) Validate() error {
	if err := c.validate(); err != nil {
		return fmt.Errorf("invalid config: %w", err)
	}
	return nil
}

// inRange checks that the value v of key is within lo..hi.
func inRange(key string, v, lo, hi int64) error {
	if v < lo || v > hi {
		return fmt.Errorf("%s %d out of range %d..%d", key, v, lo, hi)
	}
	return nil
}

func (c *Config) validate() error {
	layout := c.Layout()
	nowMs := time.Now().UnixMilli()
	checks := []func() error{
		func() error { _, err := c.Bind.parse(); return err },
		func() error { return inRange("port", int64(c.Port), 0, 65535) },
		c.validateTLS,
		c.validateEtcd,
		c.validateCluster,
		c.validateMetricsAddr,
		layout.Validate,
		func() error {
			if c.ServerID < 0 || int64(c.ServerID) > layout.MaxServerID() {
				return fmt.Errorf("server-id %d out of range 0..%d (id-range %d)", c.ServerID, layout.MaxServerID(), c.IDRange)
			}
			return nil
		},
		func() error {
			if c.EpochMs < 0 || c.EpochMs > nowMs {
				return fmt.Errorf("epoch %d out of range 0..%d (now): it must not be in the future", c.EpochMs, nowMs)
			}
			return nil
		},
		func() error { return inRange("max-lead-ms", c.MaxLead.Milliseconds(), 1, 3_600_000) },
		func() error { return inRange("max-wait-ms", c.MaxWait.Milliseconds(), 0, 60_000) },
		func() error { return inRange("mgetid-max", int64(c.MGetIDMax), 1, 1_000_000) },
		func() error { return inRange("gomaxprocs", int64(c.GoMaxProcs), 0, 1024) },
		func() error {
			// One MGETID takes mgetid-max consecutive units: it must fit
			// in the lead bound or it could never succeed.
			if fit := int64(1) << c.ShardRange * c.MaxLead.Milliseconds(); int64(c.MGetIDMax) > fit {
				return fmt.Errorf("mgetid-max %d exceeds the %d IDs that fit in max-lead-ms %d at shard-range %d (2^%d per ms)",
					c.MGetIDMax, fit, c.MaxLead.Milliseconds(), c.ShardRange, c.ShardRange)
			}
			return nil
		},
		c.validatePublicID,
		func() error { return inRange("maxclients", int64(c.MaxClients), 1, 1_000_000) },
		func() error { return inRange("timeout", int64(c.Timeout.Duration/time.Second), 0, 31_536_000) },
		func() error { return inRange("metrics-maxclients", int64(c.MetricsMaxClients), 1, 10_000) },
		func() error { return inRange("metrics-timeout", int64(c.MetricsTimeout.Duration/time.Second), 1, 3600) },
		func() error { return inRange("proto-max-bulk-len", int64(c.ProtoMaxBulkLen), 1024, 512<<20) },
		func() error { return inRange("proto-max-multibulk-len", int64(c.ProtoMaxMultibulkLen), 16, 1<<20) },
		func() error {
			if c.ClientQueryBufferLimit < c.ProtoMaxBulkLen {
				return fmt.Errorf("client-query-buffer-limit %d is below proto-max-bulk-len %d: a bulk that long could never arrive", c.ClientQueryBufferLimit, c.ProtoMaxBulkLen)
			}
			return inRange("client-query-buffer-limit", int64(c.ClientQueryBufferLimit), 1024, 1<<30)
		},
		func() error {
			if c.MaxMemoryClients == 0 {
				return nil
			}
			return inRange("maxmemory-clients", int64(c.MaxMemoryClients), 1<<20, 1<<40)
		},
		func() error {
			if strings.TrimSpace(c.Dir) == "" {
				return errors.New("dir must not be empty")
			}
			if c.StateFile == "" || strings.ContainsRune(c.StateFile, '/') || c.StateFile == "." || c.StateFile == ".." {
				return fmt.Errorf("state-file %q must be a file name, without a directory (set dir for that)", c.StateFile)
			}
			return nil
		},
		func() error { return inRange("reserve-ms", c.ReserveAhead.Milliseconds(), 10, 600_000) },
		func() error {
			if c.SeqFile == "" || strings.ContainsRune(c.SeqFile, '/') || c.SeqFile == "." || c.SeqFile == ".." || c.SeqFile == c.StateFile {
				return fmt.Errorf("seq-file %q must be a file name, without a directory, other than state-file", c.SeqFile)
			}
			return nil
		},
		func() error { return inRange("seq-max-keys", int64(c.SeqMaxKeys), 1, 100_000_000) },
		func() error { return inRange("seq-max-key-bytes", int64(c.SeqMaxKeyBytes), 1, 65536) },
		func() error { return inRange("seq-max-incrby", c.SeqMaxIncrBy, 1, 1<<40) },
		func() error { return inRange("seq-segment-ms", c.SeqSegment.Milliseconds(), 10, 3_600_000) },
		func() error { return inRange("seq-max-segment", c.SeqMaxSegment, 1, 1<<40) },
		func() error {
			// A reservation must hold the largest MGETID with room to spare,
			// or such a request could wait for ever for a large enough one.
			span := (int64(c.MGetIDMax) + 1<<c.ShardRange - 1) >> c.ShardRange
			if c.ReserveAhead.Milliseconds() < 2*span {
				return fmt.Errorf("reserve-ms %d is less than twice the %dms one MGETID of mgetid-max %d spans at shard-range %d",
					c.ReserveAhead.Milliseconds(), span, c.MGetIDMax, c.ShardRange)
			}
			return nil
		},
		func() error {
			if c.DebugClockOffset.Duration != 0 && c.EnableDebugCommand == DebugNo {
				return fmt.Errorf("debug-clock-offset-ms %d needs enable-debug-command yes or local", c.DebugClockOffset.Milliseconds())
			}
			return inRange("debug-clock-offset-ms", c.DebugClockOffset.Milliseconds(), -31_536_000_000, 31_536_000_000)
		},
		func() error {
			if l := c.ClientOutputBufferLimit; l.Hard > 0 && l.Soft > l.Hard {
				return fmt.Errorf("client-output-buffer-limit: the soft limit %d is above the hard limit %d", l.Soft, l.Hard)
			}
			return nil
		},
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateTLS checks the ports and the TLS keys together, as Redis does at
// start: a TLS port needs a certificate and its key, and a CA to check
// client certificates against unless it asks for none.
func (c *Config) validateTLS() error {
	if err := inRange("tls-port", int64(c.TLSPort), 0, 65535); err != nil {
		return err
	}
	switch {
	case c.Port == 0 && c.TLSPort == 0:
		return errors.New("port and tls-port are both 0: there is nothing to listen on")
	case c.Port == c.TLSPort:
		return fmt.Errorf("port and tls-port are both %d", c.Port)
	case c.TLSPort == 0:
		return nil
	case c.TLSCertFile == "" || c.TLSKeyFile == "":
		return fmt.Errorf("tls-port %d needs tls-cert-file and tls-key-file", c.TLSPort)
	case c.TLSAuthClients != TLSAuthNo && c.TLSCACertFile == "":
		return fmt.Errorf("tls-auth-clients %s needs tls-ca-cert-file to check client certificates against (or tls-auth-clients no)", c.TLSAuthClients)
	}
	return nil
}

// validateEtcd checks the cluster mode keys.
func (c *Config) validateEtcd() error {
	if c.EtcdEndpoints == "" {
		return nil
	}
	if !strings.HasPrefix(c.EtcdPrefix, "/") || !strings.HasSuffix(c.EtcdPrefix, "/") {
		return fmt.Errorf("etcd-prefix %q must start and end with /", c.EtcdPrefix)
	}
	if (c.EtcdCertFile == "") != (c.EtcdKeyFile == "") {
		return errors.New("etcd-cert-file and etcd-key-file go together")
	}
	if err := inRange("etcd-lease-ttl", int64(c.EtcdLeaseTTL.Duration/time.Second), 2, 300); err != nil {
		return err
	}
	return inRange("etcd-dial-timeout", int64(c.EtcdDialTimeout.Duration/time.Second), 1, 60)
}

// validateCluster checks the cluster-announce keys as Redis does: ports
// in 0..65535, a hostname of letters, digits, hyphens and dots (Redis's
// check: CLUSTER NODES and SHARDS show it as is), an address without
// spaces.
func (c *Config) validateCluster() error {
	if err := inRange("cluster-announce-port", int64(c.ClusterAnnouncePort), 0, 65535); err != nil {
		return err
	}
	if err := inRange("cluster-announce-tls-port", int64(c.ClusterAnnounceTLSPort), 0, 65535); err != nil {
		return err
	}
	if err := inRange("cluster-announce-bus-port", int64(c.ClusterAnnounceBusPort), 0, 65535); err != nil {
		return err
	}
	if err := inRange("cluster-port", int64(c.ClusterPort), 0, 65535); err != nil {
		return err
	}
	if p := c.ClusterPort; p != 0 && (p == c.Port || p == c.TLSPort) {
		return fmt.Errorf("cluster-port %d is port or tls-port too: the servers' port must be apart from the clients'", p)
	}
	if c.TLSCluster == Yes && (c.TLSCertFile == "" || c.TLSKeyFile == "" || c.TLSCACertFile == "") {
		return errors.New("tls-cluster yes needs tls-cert-file and tls-key-file (this server's certificate, presented to the others too) and tls-ca-cert-file (to check theirs)")
	}
	if strings.ContainsFunc(c.ClusterAnnounceIP, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return fmt.Errorf("cluster-announce-ip %q must not contain spaces or control characters", c.ClusterAnnounceIP)
	}
	h := c.ClusterAnnounceHostname
	if len(h) >= 256 {
		return fmt.Errorf("cluster-announce-hostname: hostnames must be less than 256 characters")
	}
	if strings.ContainsFunc(h, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '.')
	}) {
		return fmt.Errorf("cluster-announce-hostname %q: hostnames may only contain alphanumeric characters, hyphens or dots", h)
	}
	return nil
}

// PublicID returns the settings of PUBLICID's and PRIVATEID's codec
// (publicid.New builds it): public-id-alphabet, public-id-min-length
// and public-id-key, decoded from hex. Validate has checked them.
func (c *Config) PublicID() publicid.Settings {
	key, _ := c.publicIDKey()
	return publicid.Settings{Alphabet: c.PublicIDAlphabet, MinLength: c.PublicIDMinLength, Key: key}
}

// publicIDKey decodes public-id-key: nil when it is empty.
func (c *Config) publicIDKey() ([]byte, error) {
	if c.PublicIDKey == "" {
		return nil, nil
	}
	k, err := hex.DecodeString(c.PublicIDKey)
	if err != nil || len(k) != 16 && len(k) != 24 && len(k) != 32 {
		// The key itself is not quoted: errors are logged.
		return nil, fmt.Errorf("public-id-key must be 32, 48 or 64 hex digits (an AES-128, -192 or -256 key), not %d characters", len(c.PublicIDKey))
	}
	return k, nil
}

// validatePublicID checks public-id-key, public-id-min-length and
// public-id-alphabet, by publicid's rules.
func (c *Config) validatePublicID() error {
	if _, err := c.publicIDKey(); err != nil {
		return err
	}
	if err := inRange("public-id-min-length", int64(c.PublicIDMinLength), 0, publicid.MaxMinLength); err != nil {
		return err
	}
	if err := c.PublicID().Validate(); err != nil {
		return fmt.Errorf("public-id-alphabet: %w", err)
	}
	return nil
}

// Redacted is what CONFIG GET shows for a secret that is set.
const Redacted = "(redacted)"

// Shown returns every key with its effective value as CONFIG GET shows
// it: Pairs, with secrets other than Redis's own requirepass redacted.
// Any client allowed to run CONFIG GET may read it.
func (c *Config) Shown() [][2]string {
	pairs := c.Pairs()
	for i, f := range fields {
		if f.secret && pairs[i][1] != "" {
			pairs[i][1] = Redacted
		}
	}
	return pairs
}

// Pairs returns every key with its effective value, in a stable order:
// loaded back, they give the same configuration.
func (c *Config) Pairs() [][2]string {
	rv := reflect.ValueOf(c).Elem()
	pairs := make([][2]string, 0, len(fields))
	for _, f := range fields {
		pairs = append(pairs, [2]string{f.key, fmt.Sprint(rv.Field(f.index).Interface())})
	}
	return pairs
}

// Layout is the split of the IDs' low bits the configuration gives.
func (c *Config) Layout() idgen.Layout {
	return idgen.Layout{IDBits: c.IDRange, ShardBits: c.ShardRange, RandomBits: c.RandomRange}
}

// Epoch is the start of the IDs' time field.
func (c *Config) Epoch() time.Time { return time.UnixMilli(c.EpochMs) }
