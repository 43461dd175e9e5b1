package conf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/idserver/idserver/publicid"
	"github.com/idserver/idserver/sequence"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "idserver.conf")
	if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

func defaults() Config {
	return Config{
		Bind: "127.0.0.1", Port: 6551, ProtectedMode: Yes, TLSAuthClients: TLSAuthYes,
		ServerID: 0, IDRange: 2, ShardRange: 9, RandomRange: 10, EpochMs: 1420041600000,
		MaxLead: Millis{5 * time.Second}, MaxWait: Millis{100 * time.Millisecond},
		MGetIDMax: 10000, GetIDReply: GetIDAuto, MaxClients: 10000, GoMaxProcs: 1,
		ProtoMaxBulkLen: 64 << 10, ProtoMaxMultibulkLen: 1024, ClientQueryBufferLimit: 1 << 20, MaxMemoryClients: 64 << 20,
		Dir: ".", StateFile: "idserver.state", ReserveAhead: Millis{3 * time.Second}, EnableDebugCommand: DebugNo,
		SeqFile: "idserver.seq", SeqMaxKeys: 1000000, SeqMaxKeyBytes: 512, SeqMaxIncrBy: 1000000,
		SeqSegment: Millis{3 * time.Second}, SeqMaxSegment: 1000000,
		ClientOutputBufferLimit: OutputLimit{Hard: 16 << 20, Soft: 8 << 20, SoftSeconds: time.Minute},
		LogLevel:                LogNotice, MetricsMaxClients: 16, MetricsTimeout: Seconds{10 * time.Second}, MetricsPprof: No,
		EtcdPrefix: "/idserver/", EtcdLeaseTTL: Seconds{5 * time.Second}, EtcdDialTimeout: Seconds{5 * time.Second},
		ClusterEnabled: No, TLSCluster: No, PublicIDAlphabet: publicid.DefaultAlphabet,
	}
}

func TestDefaults(t *testing.T) {
	c, err := Load(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := defaults(); *c != want {
		t.Fatalf("Load(nil, nil) = %+v\nwant %+v", *c, want)
	}
}

func TestFile(t *testing.T) {
	name := writeFile(t, `
# a comment
PORT 7000
port 7001
`+"\x00port 7002"+`
Server-Id 1
requirepass "p w\"d\x41"
bind '127.0.0.2'
proto-max-bulk-len 1mb
loglevel   warning
id-generator server-id 3 id-range 3 shard-range 8 random-range 10
`)
	c, err := Load([]string{name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := defaults()
	want.Port, want.ServerID, want.IDRange, want.ShardRange = 7001, 3, 3, 8
	want.RequirePass, want.Bind, want.ProtoMaxBulkLen, want.LogLevel = `p w"dA`, "127.0.0.2", 1<<20, LogWarning
	want.File = name
	want.MGetIDMax = 10000
	want.ServerIDSet = true // by the file: pins a cluster mode claim
	if *c != want {
		t.Fatalf("got  %+v\nwant %+v", *c, want)
	}
}

func TestSizes(t *testing.T) {
	for in, want := range map[string]Size{"2048": 2048, "4k": 4000, "4KB": 4096, "2m": 2e6, "2mb": 2 << 20, "1gb": 1 << 30, "100000b": 100000} {
		if in == "1gb" {
			continue // above the allowed maximum; parsed below
		}
		c, err := Load([]string{"--proto-max-bulk-len", in, "--client-query-buffer-limit", "512mb"}, nil)
		if err != nil || c.ProtoMaxBulkLen != want {
			t.Errorf("proto-max-bulk-len %s: %v, %v; want %d", in, c, err, want)
		}
	}
	if _, err := Load([]string{"--proto-max-bulk-len", "2mb"}, nil); err == nil || !strings.Contains(err.Error(), "client-query-buffer-limit 1048576 is below proto-max-bulk-len 2097152") {
		t.Errorf("proto-max-bulk-len above client-query-buffer-limit: %v", err)
	}
	if n, err := parseNumber("1gb", true); n != 1<<30 || err != nil {
		t.Errorf("1gb = %d, %v", n, err)
	}
}

func TestPrecedence(t *testing.T) {
	name := writeFile(t, "port 7000\nserver-id 1\nloglevel debug\n")
	env := []string{"IDSERVER_PORT=7100", "IDSERVER_SERVER_ID=2", "HOME=/root"}
	c, err := Load([]string{"--config", name, "--port", "7200"}, env)
	if err != nil {
		t.Fatal(err)
	}
	// flag > env > file > default
	if c.Port != 7200 || c.ServerID != 2 || c.LogLevel != LogDebug || c.MaxClients != 10000 {
		t.Fatalf("port %d server-id %d loglevel %s maxclients %d", c.Port, c.ServerID, c.LogLevel, c.MaxClients)
	}
}

func TestInvalid(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--port", "70000"}, "invalid config: port 70000 out of range 0..65535"},
		{[]string{"--port", "abc"}, `invalid config: port "abc": not an integer`},
		{[]string{"--bind", " "}, "invalid config: bind must not be empty"},
		{[]string{"--protected-mode", "off"}, `invalid config: protected-mode "off": must be one of yes, no`},
		{[]string{"--port", "0"}, "invalid config: port and tls-port are both 0: there is nothing to listen on"},
		{[]string{"--tls-port", "6551"}, "invalid config: port and tls-port are both 6551"},
		{[]string{"--tls-port", "70000"}, "invalid config: tls-port 70000 out of range 0..65535"},
		{[]string{"--tls-port", "6552"}, "invalid config: tls-port 6552 needs tls-cert-file and tls-key-file"},
		{[]string{"--tls-port", "6552", "--tls-cert-file", "c", "--tls-key-file", "k"}, "invalid config: tls-auth-clients yes needs tls-ca-cert-file"},
		{[]string{"--tls-port", "6552", "--tls-cert-file", "c", "--tls-key-file", "k", "--tls-auth-clients", "optional"}, "invalid config: tls-auth-clients optional needs tls-ca-cert-file"},
		{[]string{"--tls-auth-clients", "maybe"}, `invalid config: tls-auth-clients "maybe": must be one of yes, no, optional`},
		{[]string{"--etcd-endpoints", "127.0.0.1:2379", "--etcd-prefix", "idserver"}, `invalid config: etcd-prefix "idserver" must start and end with /`},
		{[]string{"--etcd-endpoints", "127.0.0.1:2379", "--etcd-cert-file", "c"}, "invalid config: etcd-cert-file and etcd-key-file go together"},
		{[]string{"--etcd-endpoints", "127.0.0.1:2379", "--etcd-lease-ttl", "1"}, "invalid config: etcd-lease-ttl 1 out of range 2..300"},
		{[]string{"--etcd-endpoints", "127.0.0.1:2379", "--etcd-dial-timeout", "0"}, "invalid config: etcd-dial-timeout 0 out of range 1..60"},
		{[]string{"--cluster-enabled", "maybe"}, `invalid config: cluster-enabled "maybe": must be one of yes, no`},
		{[]string{"--cluster-announce-port", "70000"}, "invalid config: cluster-announce-port 70000 out of range 0..65535"},
		{[]string{"--cluster-announce-tls-port", "-1"}, "invalid config: cluster-announce-tls-port -1 out of range 0..65535"},
		{[]string{"--cluster-announce-bus-port", "65536"}, "invalid config: cluster-announce-bus-port 65536 out of range 0..65535"},
		{[]string{"--cluster-port", "-1"}, "invalid config: cluster-port -1 out of range 0..65535"},
		{[]string{"--cluster-port", "6551"}, "invalid config: cluster-port 6551 is port or tls-port too: the servers' port must be apart from the clients'"},
		{[]string{"--tls-cluster", "yes"}, "invalid config: tls-cluster yes needs tls-cert-file and tls-key-file (this server's certificate, presented to the others too) and tls-ca-cert-file (to check theirs)"},
		{[]string{"--cluster-announce-hostname", "a_b"}, `invalid config: cluster-announce-hostname "a_b": hostnames may only contain alphanumeric characters, hyphens or dots`},
		{[]string{"--cluster-announce-hostname", strings.Repeat("a", 256)}, "invalid config: cluster-announce-hostname: hostnames must be less than 256 characters"},
		{[]string{"--cluster-announce-ip", "1.2.3.4 x"}, `invalid config: cluster-announce-ip "1.2.3.4 x" must not contain spaces`},
		{[]string{"--id-range", "3"}, "invalid config: id-range 3 + shard-range 9 + random-range 10 = 22, must be 21"},
		{[]string{"--id-range", "21", "--shard-range", "0", "--random-range", "0"}, "invalid config: id-range 21 out of range 0..20"},
		{[]string{"--shard-range", "0", "--random-range", "19"}, "invalid config: shard-range 0 out of range 1..21"},
		{[]string{"--random-range", "-1", "--shard-range", "20"}, "invalid config: random-range -1 out of range 0..20"},
		{[]string{"--server-id", "4"}, "invalid config: server-id 4 out of range 0..3 (id-range 2)"},
		{[]string{"--server-id", "-1"}, "invalid config: server-id -1 out of range 0..3 (id-range 2)"},
		{[]string{"--epoch", "-1"}, "invalid config: epoch -1 out of range 0.."},
		{[]string{"--epoch", "99999999999999"}, "invalid config: epoch 99999999999999 out of range 0.."},
		{[]string{"--max-lead-ms", "0"}, "invalid config: max-lead-ms 0 out of range 1..3600000"},
		{[]string{"--max-wait-ms", "60001"}, "invalid config: max-wait-ms 60001 out of range 0..60000"},
		{[]string{"--mgetid-max", "0"}, "invalid config: mgetid-max 0 out of range 1..1000000"},
		{[]string{"--getid-reply", "bigint"}, `invalid config: getid-reply "bigint": must be one of auto, integer, string`},
		{[]string{"--mgetid-max", "1000", "--max-lead-ms", "1", "--shard-range", "1", "--random-range", "18"}, "invalid config: mgetid-max 1000 exceeds the 2 IDs that fit in max-lead-ms 1 at shard-range 1"},
		{[]string{"--gomaxprocs", "-1"}, "invalid config: gomaxprocs -1 out of range 0..1024"},
		{[]string{"--maxclients", "0"}, "invalid config: maxclients 0 out of range 1..1000000"},
		{[]string{"--timeout", "-1"}, "invalid config: timeout -1 out of range 0..31536000"},
		{[]string{"--proto-max-bulk-len", "10"}, "invalid config: proto-max-bulk-len 10 out of range 1024..536870912"},
		{[]string{"--proto-max-bulk-len", "5xb"}, `invalid config: proto-max-bulk-len "5xb": not a size`},
		{[]string{"--proto-max-multibulk-len", "15"}, "invalid config: proto-max-multibulk-len 15 out of range 16..1048576"},
		{[]string{"--loglevel", "info"}, `invalid config: loglevel "info": must be one of debug, verbose, notice, warning`},
		{[]string{"--max-lead-ms", "99999999999999999"}, `invalid config: max-lead-ms "99999999999999999": out of range`},
		{[]string{"--dir", ""}, "invalid config: dir must not be empty"},
		{[]string{"--state-file", "a/b"}, `invalid config: state-file "a/b" must be a file name`},
		{[]string{"--reserve-ms", "5"}, "invalid config: reserve-ms 5 out of range 10..600000"},
		{[]string{"--seq-file", "a/b"}, `invalid config: seq-file "a/b" must be a file name, without a directory, other than state-file`},
		{[]string{"--seq-file", "idserver.state"}, `invalid config: seq-file "idserver.state" must be a file name, without a directory, other than state-file`},
		{[]string{"--seq-max-keys", "0"}, "invalid config: seq-max-keys 0 out of range 1..100000000"},
		{[]string{"--seq-max-key-bytes", "70000"}, "invalid config: seq-max-key-bytes 70000 out of range 1..65536"},
		{[]string{"--seq-max-incrby", "0"}, "invalid config: seq-max-incrby 0 out of range"},
		{[]string{"--seq-segment-ms", "1"}, "invalid config: seq-segment-ms 1 out of range 10..3600000"},
		{[]string{"--seq-max-segment", "0"}, "invalid config: seq-max-segment 0 out of range"},
		{[]string{"--reserve-ms", "30"}, "invalid config: reserve-ms 30 is less than twice the 20ms one MGETID of mgetid-max 10000 spans at shard-range 9"},
		{[]string{"--enable-debug-command", "maybe"}, `invalid config: enable-debug-command "maybe": must be one of no, yes, local`},
		{[]string{"--debug-clock-offset-ms", "-5"}, "invalid config: debug-clock-offset-ms -5 needs enable-debug-command yes or local"},
		{[]string{"--client-output-buffer-limit", "replica 1mb 1mb 1"}, `invalid config: client-output-buffer-limit "replica 1mb 1mb 1": want normal <hard> <soft> <soft-seconds> (only the normal class applies`},
		{[]string{"--client-output-buffer-limit", "normal 1mb 1mb"}, `invalid config: client-output-buffer-limit "normal 1mb 1mb": want normal`},
		{[]string{"--client-output-buffer-limit", "normal 1xb 1mb 0"}, `invalid config: client-output-buffer-limit "normal 1xb 1mb 0": hard limit: not a size`},
		{[]string{"--client-output-buffer-limit", "normal -1 1mb 0"}, `invalid config: client-output-buffer-limit "normal -1 1mb 0": limits must be 0 or more`},
		{[]string{"--client-output-buffer-limit", "normal 1mb 2mb 0"}, "invalid config: client-output-buffer-limit: the soft limit 2097152 is above the hard limit 1048576"},
		{[]string{"--nope", "1"}, "command line: unknown flag: --nope"},
		{[]string{"a.conf", "b.conf"}, `command line: unexpected arguments ["a.conf" "b.conf"]`},
		{[]string{"/nonexistent/idserver.conf"}, "read config: open /nonexistent/idserver.conf: no such file or directory"},
	}
	for _, tt := range tests {
		_, err := Load(tt.args, nil)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Load(%q, nil) = %v, want %q", tt.args, err, tt.want)
		}
	}
	if _, err := Load(nil, []string{"IDSERVER_MGETID_MAX=lots"}); err == nil || err.Error() != `invalid config: mgetid-max "lots": not an integer` {
		t.Errorf("bad env value: %v", err)
	}
}

// TestUnknownEnv: an IDSERVER_* variable that names no key stops the
// start with one line naming it, as an unknown key in the file does.
func TestUnknownEnv(t *testing.T) {
	_, err := Load(nil, []string{"IDSERVER_MGETID_MAXX=50"})
	want := `environment: unknown variable IDSERVER_MGETID_MAXX (no key "mgetid-maxx"; did you mean IDSERVER_MGETID_MAX?)`
	if err == nil || err.Error() != want {
		t.Fatalf("Load with IDSERVER_MGETID_MAXX: %v, want %q", err, want)
	}
	_, err = Load(nil, []string{"IDSERVER_APPENDONLY=yes"})
	want = `environment: unknown variable IDSERVER_APPENDONLY (no key "appendonly"; idserver --help lists the keys)`
	if err == nil || err.Error() != want {
		t.Fatalf("Load with IDSERVER_APPENDONLY: %v, want %q", err, want)
	}
	env := []string{"IDSERVER_CLIENT_OUTPUT_BUFFER_LIMIT=normal 0 0 0", "OTHER_IDSERVER_X=1"} // the second: not the prefix
	if _, err := Load(nil, env); err != nil {
		t.Fatalf("known variables only: %v", err)
	}
}

func TestFileErrors(t *testing.T) {
	tests := []struct{ text, want string }{
		{"port 1\nprot 2\n", `line 2: unknown key "prot"`},
		{"port\n", "line 1: port takes exactly one value, got 0"},
		{"bind\n", "line 1: bind takes one or more values, got none"},
		{"client-output-buffer-limit\n", "line 1: client-output-buffer-limit takes one or more values, got none"},
		{"# c\nid-generator server-id 0 id-range\n", "line 2: id-generator takes key value pairs"},
		{"id-generator port 1\n", `line 1: id-generator: unknown key "port"`},
		{`requirepass "abc`, "line 1: unbalanced quotes"},
		{`requirepass "abc"d`, "line 1: unbalanced quotes"},
		{"save 60 1\n", `line 1: unknown key "save"`},
	}
	for _, tt := range tests {
		name := writeFile(t, tt.text)
		_, err := Load([]string{name}, nil)
		if want := "read config " + name + ": " + tt.want; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: %v, want %q", tt.text, err, want)
		}
	}
}

func TestHelp(t *testing.T) {
	if _, err := Load([]string{"--help"}, nil); !errors.Is(err, pflag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
}

// TestExampleFile keeps redis.conf.example in step with Config: it loads
// to exactly the defaults, and shows every key with its default: set, or
// for server-id, commented out ("# server-id 0"), because setting it pins
// a cluster mode claim.
func TestExampleFile(t *testing.T) {
	c, err := Load([]string{"../redis.conf.example"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := defaults()
	want.File = "../redis.conf.example"
	if *c != want {
		t.Fatalf("example loads as %+v\nwant %+v", *c, want)
	}
	values, err := ReadFile("../redis.conf.example")
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile("../redis.conf.example")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range Keys() {
		_, set := values[k]
		if commented := strings.Contains(string(text), "\n# "+k+" "+want.Pairs()[slices.Index(Keys(), k)][1]+"\n"); set == (k == "server-id") || k == "server-id" && !commented {
			t.Errorf("redis.conf.example: %s set %v, want it set (server-id: commented out with its default)", k, set)
		}
	}
}

// TestOutputLimit: client-output-buffer-limit in its redis.conf form, from
// a file, the environment and a flag; 0 turns a limit off.
func TestOutputLimit(t *testing.T) {
	name := writeFile(t, "client-output-buffer-limit normal 64mb 16MB 30\n")
	c, err := Load([]string{name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (OutputLimit{Hard: 64 << 20, Soft: 16 << 20, SoftSeconds: 30 * time.Second}); c.ClientOutputBufferLimit != want {
		t.Fatalf("from the file: %+v, want %+v", c.ClientOutputBufferLimit, want)
	}
	if c, err = Load([]string{name}, []string{"IDSERVER_CLIENT_OUTPUT_BUFFER_LIMIT=normal 0 0 0"}); err != nil || c.ClientOutputBufferLimit != (OutputLimit{}) {
		t.Fatalf("from the environment: %+v, %v", c.ClientOutputBufferLimit, err)
	}
	c, err = Load([]string{name, "--client-output-buffer-limit", "normal 1000 100 1"}, nil)
	if err != nil || c.ClientOutputBufferLimit != (OutputLimit{Hard: 1000, Soft: 100, SoftSeconds: time.Second}) {
		t.Fatalf("from a flag: %+v, %v", c.ClientOutputBufferLimit, err)
	}
	if got := c.ClientOutputBufferLimit.String(); got != "normal 1000 100 1" {
		t.Fatalf("CONFIG GET form %q", got)
	}
}

func TestPairs(t *testing.T) {
	c, err := Load([]string{"--max-lead-ms", "250", "--timeout", "30"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range c.Pairs() {
		got[kv[0]] = kv[1]
	}
	want := map[string]string{"max-lead-ms": "250", "timeout": "30", "proto-max-bulk-len": "65536", "requirepass": "", "epoch": "1420041600000"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("Pairs()[%s] = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(Keys()) {
		t.Errorf("Pairs has %d keys, want %d", len(got), len(Keys()))
	}
	// Every pair loads back to the same config.
	var args []string
	for _, kv := range c.Pairs() {
		args = append(args, "--"+kv[0], kv[1])
	}
	c2, err := Load(args, nil)
	if err != nil || !c2.ServerIDSet {
		t.Fatalf("Pairs do not load back: %v, server-id given %v", err, c2.ServerIDSet)
	}
	c2.ServerIDSet = false // given here, defaulted in c
	if !reflect.DeepEqual(c, c2) {
		t.Fatalf("Pairs do not round-trip: %+v", c2)
	}
}

// TestPublicID: public-id-key is a hex AES key, refused otherwise without
// quoting it; the alphabet and minimum length are checked; the key is
// shown redacted.
func TestPublicID(t *testing.T) {
	key := "00112233445566778899aabbccddeeff"
	for _, tt := range []struct {
		args []string
		err  string
	}{
		{nil, ""},
		{[]string{"--public-id-key", key}, ""},
		{[]string{"--public-id-key", key + "0011223344556677"}, ""},
		{[]string{"--public-id-key", key + key}, ""},
		{[]string{"--public-id-key", key[:30] + "zz"}, "public-id-key must be 32, 48 or 64 hex digits"},
		{[]string{"--public-id-key", key[:30]}, "public-id-key must be 32, 48 or 64 hex digits"},
		{[]string{"--public-id-alphabet", "abca"}, "public-id-alphabet: alphabet must contain unique characters"},
		{[]string{"--public-id-alphabet", "0123456789", "--public-id-key", key}, "at least 16"},
		{[]string{"--public-id-min-length", "21"}, "public-id-min-length 21 out of range 0..20"},
	} {
		c, err := Load(tt.args, nil)
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%v: %v, want %q", tt.args, err, tt.err)
		}
		if err != nil && strings.Contains(err.Error(), key[:30]) {
			t.Errorf("%v: the error shows the key: %v", tt.args, err)
		}
		if err != nil {
			continue
		}
		if _, err := publicid.New(c.PublicID()); err != nil {
			t.Errorf("%v: publicid.New(PublicID()): %v", tt.args, err)
		}
		if keyed := c.PublicID().Key != nil; keyed != (c.PublicIDKey != "") {
			t.Errorf("%v: PublicID's key set: %v", tt.args, keyed)
		}
		for _, kv := range c.Shown() {
			if strings.Contains(kv[1], key) {
				t.Errorf("%v: Shown shows the key as %s %q", tt.args, kv[0], kv[1])
			}
		}
	}
}

// TestShownRedactsSecrets: CONFIG GET shows requirepass, as Redis does,
// but not the etcd password, and shows an unset one as empty.
func TestShownRedactsSecrets(t *testing.T) {
	c, err := Load([]string{"--requirepass", "pw", "--etcd-password", "s3cret"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	shown := map[string]string{}
	for _, kv := range c.Shown() {
		shown[kv[0]] = kv[1]
	}
	if shown["etcd-password"] != Redacted || shown["requirepass"] != "pw" {
		t.Fatalf("Shown: etcd-password %q, requirepass %q", shown["etcd-password"], shown["requirepass"])
	}
	for _, kv := range c.Shown() {
		if strings.Contains(kv[1], "s3cret") {
			t.Fatalf("Shown shows the secret as %s %q", kv[0], kv[1])
		}
	}
	c, _ = Load(nil, nil)
	for _, kv := range c.Shown() {
		if kv[1] == Redacted {
			t.Fatalf("Shown redacts unset %s", kv[0])
		}
	}
}

func TestSplitArgs(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"a b\tc", []string{"a", "b", "c"}},
		{`k "a b" 'c d'`, []string{"k", "a b", "c d"}},
		{`k "\n\t\\\"\x41"`, []string{"k", "\n\t\\\"A"}},
		{`k 'it\'s'`, []string{"k", "it's"}},
		{`k ""`, []string{"k", ""}},
	}
	for _, tt := range tests {
		got, err := splitArgs(tt.in)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("splitArgs(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("port 1\n# c\nid-generator server-id 1 id-range 2\n")
	f.Add(`requirepass "a\x4"` + "\nbind 'x\\'y'\n")
	f.Add("\"\n'\n\\")
	f.Add("\x00") // a line that splits into no words (CI found it)
	f.Fuzz(func(t *testing.T, text string) {
		values, err := Parse(strings.NewReader(text))
		if err != nil {
			return
		}
		for k := range values {
			if _, ok := lookup(k); !ok {
				t.Fatalf("Parse accepted unknown key %q", k)
			}
		}
	})
}

func ExampleLoad() {
	c, err := Load([]string{"--port", "7000", "--server-id", "1"}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(c.Port, c.ServerID, c.ShardRange)
	// Output: 7000 1 9
}

// TestServerIDSet: server-id counts as given (pinning a cluster mode
// claim) from a file, the environment or a flag, and not when defaulted.
func TestServerIDSet(t *testing.T) {
	if c, err := Load(nil, nil); err != nil || c.ServerIDSet {
		t.Fatalf("defaults: server-id given %v, %v", c.ServerIDSet, err)
	}
	if c, err := Load([]string{"--server-id", "0"}, nil); err != nil || !c.ServerIDSet {
		t.Fatalf("flag: server-id given %v, %v", c.ServerIDSet, err)
	}
	if c, err := Load(nil, []string{"IDSERVER_SERVER_ID=1"}); err != nil || !c.ServerIDSet || c.ServerID != 1 {
		t.Fatalf("environment: %+v, %v", c, err)
	}
}

// TestBind: bind takes several addresses as Redis 7 does, the same from
// the file (words), a flag and the environment (one string): IP
// addresses, * and ::*, each optional with a leading -. CONFIG GET shows
// them space-separated, as written.
func TestBind(t *testing.T) {
	for _, tt := range []struct {
		in, shown string
		networks  []string // of each address: tcp4 or tcp6, and - if optional
	}{
		{"127.0.0.1", "127.0.0.1", []string{"tcp4"}},
		{"127.0.0.1 ::1", "127.0.0.1 ::1", []string{"tcp4", "tcp6"}},
		{"127.0.0.1 -::1", "127.0.0.1 -::1", []string{"tcp4", "-tcp6"}},
		{"* -::*", "* -::*", []string{"tcp4", "-tcp6"}},
		{"0.0.0.0 ::", "0.0.0.0 ::", []string{"tcp4", "tcp6"}},
		{"::*", "::*", []string{"tcp6"}},
		{"-*", "-*", []string{"-tcp4"}},
		{"192.168.1.100   10.0.0.1", "192.168.1.100 10.0.0.1", []string{"tcp4", "tcp4"}},
		{"127.0.0.1 -192.0.2.99", "127.0.0.1 -192.0.2.99", []string{"tcp4", "-tcp4"}},
		{"fe80::1%eth0", "fe80::1%eth0", []string{"tcp6"}},
		{"* -192.0.2.99", "* -192.0.2.99", []string{"tcp4", "-tcp4"}}, // an optional address * covers may be one this machine lacks: Redis skips it
	} {
		name := writeFile(t, "bind "+tt.in+"\n")
		for _, how := range []struct {
			source        string
			args, environ []string
		}{
			{"file", []string{name}, nil},
			{"flag", []string{"--bind", tt.in}, nil},
			{"env", nil, []string{"IDSERVER_BIND=" + tt.in}},
		} {
			c, err := Load(how.args, how.environ)
			if err != nil {
				t.Errorf("bind %q from the %s: %v", tt.in, how.source, err)
				continue
			}
			shown := c.Shown()[slices.Index(Keys(), "bind")][1]
			var networks []string
			for _, a := range c.Bind.Addrs() {
				n := a.Network()
				if a.Optional {
					n = "-" + n
				}
				networks = append(networks, n)
			}
			if shown != tt.shown || !slices.Equal(networks, tt.networks) {
				t.Errorf("bind %q from the %s: shown %q, networks %q; want %q, %q", tt.in, how.source, shown, networks, tt.shown, tt.networks)
			}
		}
	}
	many := strings.Repeat("127.0.0.1 ", 16) + "127.0.0.17"
	for _, tt := range []struct{ in, want string }{
		{" ", "invalid config: bind must not be empty"},
		{"localhost", `invalid config: bind "localhost": localhost is not an IP address, * (every IPv4 address) or ::* (every IPv6 address); host names are not taken`},
		{"127.0.0.1 999.1.1.1", `invalid config: bind "127.0.0.1 999.1.1.1": 999.1.1.1 is not an IP address`},
		{"[::1]", `invalid config: bind "[::1]": [::1] is not an IP address`},
		{"127.0.0.1:6551", `invalid config: bind "127.0.0.1:6551": 127.0.0.1:6551 is not an IP address`},
		{"127.0.0.1 -", `invalid config: bind "127.0.0.1 -": "-": an address must follow the -`},
		{"**", `invalid config: bind "**": ** is not an IP address`},
		{"127.0.0.1 127.0.0.1", `invalid config: bind "127.0.0.1 127.0.0.1": 127.0.0.1 is given twice`},
		{"127.0.0.1 -127.0.0.1", `invalid config: bind "127.0.0.1 -127.0.0.1": 127.0.0.1 is given twice`},
		{"* 0.0.0.0", `invalid config: bind "* 0.0.0.0": * and 0.0.0.0 are the same address`},
		{"* 127.0.0.1", `invalid config: bind "* 127.0.0.1": * already covers 127.0.0.1: both cannot listen on one port`},
		{"::1 ::*", `invalid config: bind "::1 ::*": ::* already covers ::1`},
		{many, `invalid config: bind "` + many + `": 17 addresses, at most 16 (as Redis)`},
	} {
		name := writeFile(t, "bind "+tt.in+"\n")
		for _, how := range []struct {
			args, environ []string
		}{
			{[]string{name}, nil},
			{[]string{"--bind", tt.in}, nil},
			{nil, []string{"IDSERVER_BIND=" + tt.in}},
		} {
			if tt.in == " " && how.args != nil && how.args[0] == name {
				continue // an empty value in the file is TestFileErrors'
			}
			_, err := Load(how.args, how.environ)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("bind %q (%q, %q): %v, want %q", tt.in, how.args, how.environ, err, tt.want)
			}
		}
	}
}

// TestMetricsAddr: metrics-addr's form is checked with the rest of the
// configuration, before the start takes the state file's lock; the host
// is left to the listener.
func TestMetricsAddr(t *testing.T) {
	for _, ok := range []string{"", "127.0.0.1:9121", ":9121", "[::1]:0", "localhost:9121"} {
		if _, err := Load([]string{"--metrics-addr", ok}, nil); err != nil {
			t.Errorf("metrics-addr %q: %v", ok, err)
		}
	}
	for _, tt := range []struct{ in, want string }{
		{"127.0.0.1", `invalid config: metrics-addr "127.0.0.1": address 127.0.0.1: missing port in address (want host:port`},
		{"127.0.0.1:x", `invalid config: metrics-addr "127.0.0.1:x": port "x" is not a number 0..65535`},
		{"127.0.0.1:70000", `invalid config: metrics-addr "127.0.0.1:70000": port "70000" is not a number 0..65535`},
		{"::1:9121", `invalid config: metrics-addr "::1:9121": address ::1:9121: too many colons in address`},
	} {
		if _, err := Load(nil, []string{"IDSERVER_METRICS_ADDR=" + tt.in}); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("metrics-addr %q: %v, want %q", tt.in, err, tt.want)
		}
	}
}

// TestMemoryLimitRule: Memory is the one place of the Go memory
// limit's formula, and what --help, redis.conf.example and the docs say
// of it is MemoryLimitRule, word for word (markup and line breaks
// aside).
func TestMemoryLimitRule(t *testing.T) {
	c := Config{MaxMemoryClients: 1000, SeqMaxKeys: 10, SeqMaxKeyBytes: 100}
	if got, want := c.Memory(sequence.KeyBytes).Limit, int64(2*1000+10*(100+sequence.EntryBytes)+128<<20); got != want {
		t.Errorf("MemoryLimit of maxmemory-clients 1000, seq-max-keys 10, seq-max-key-bytes 100: %d, want %d", got, want)
	}
	if c.MaxMemoryClients = 0; c.Memory(sequence.KeyBytes) != (Memory{}) {
		t.Errorf("Memory without maxmemory-clients: %+v, want none", c.Memory(sequence.KeyBytes))
	}
	flat := func(text string) string {
		text = regexp.MustCompile(`(?m)^\s*#`).ReplaceAllString(text, "")
		return strings.Join(strings.Fields(strings.ReplaceAll(text, "`", "")), " ")
	}
	usage := fields[slices.IndexFunc(fields, func(f field) bool { return f.key == "maxmemory-clients" })].usage
	texts := map[string]string{"maxmemory-clients' usage": usage}
	for _, name := range []string{"../redis.conf.example", "../docs/configuration.md", "../docs/sequences.md", "../docs/operations.md", "../docs/commands.md", "../deploy/kubernetes/idserver.yaml"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		texts[name] = string(b)
	}
	for name, text := range texts {
		if !strings.Contains(flat(text), MemoryLimitRule) {
			t.Errorf("%s does not say the Go memory limit is %q", name, MemoryLimitRule)
		}
	}
}
