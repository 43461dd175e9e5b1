package slots

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idserver/idserver/internal/rediscluster"
	"github.com/idserver/idserver/internal/testseed"
)

// TestSlotVectors: the examples of Redis Cluster's specification and of
// Redis's own tests (tests/unit/cluster/hostnames.tcl, keyslot tests).
func TestSlotVectors(t *testing.T) {
	if got := crc16([]byte("123456789")); got != 0x31C3 {
		t.Errorf("crc16(123456789) = %#x, want 0x31c3 (the spec's check value)", got)
	}
	for _, tt := range []struct {
		key  string
		slot int
	}{
		{"123456789", 12739},
		{"foo", 12182},
		{"bar", 5061},
		{"", 0},
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"user1000", 3443},
		{"foo{}{bar}", Of([]byte("foo{}{bar}"))}, // below: the whole key
		{"foo{{bar}}zap", Of([]byte("{bar"))},
		{"foo{bar}{zap}", Of([]byte("bar"))},
		{"{}", int(crc16([]byte("{}")) & (N - 1))},
		{"a{b", int(crc16([]byte("a{b")) & (N - 1))},
		{"a}b{c}", Of([]byte("c"))},
	} {
		if got := Of([]byte(tt.key)); got != tt.slot {
			t.Errorf("Of(%q) = %d, want %d", tt.key, got, tt.slot)
		}
	}
	if got, whole := Of([]byte("foo{}{bar}")), int(crc16([]byte("foo{}{bar}"))&(N-1)); got != whole {
		t.Errorf("foo{}{bar}: slot %d, want the whole key's %d (an empty tag is no tag)", got, whole)
	}
	if Of([]byte("foo{{bar}}zap")) != int(crc16([]byte("{bar"))&(N-1)) {
		t.Error("foo{{bar}}zap: want the slot of {bar")
	}
}

// TestSlotsLikeRedis compares Of with a real redis-server's CLUSTER
// KEYSLOT over random keys, braces frequent among their bytes.
func TestSlotsLikeRedis(t *testing.T) {
	addr := rediscluster.Start(t)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	rng := rand.New(rand.NewPCG(testseed.Get(t), 0))
	alphabet := []byte("{}{}ab\x00\xff\r\n ")
	const n = 2000
	keys := make([][]byte, n)
	var req []byte
	for i := range keys {
		k := make([]byte, rng.IntN(12))
		for j := range k {
			if rng.IntN(3) == 0 {
				k[j] = byte(rng.IntN(256))
			} else {
				k[j] = alphabet[rng.IntN(len(alphabet))]
			}
		}
		keys[i] = k
		req = fmt.Appendf(req, "*3\r\n$7\r\nCLUSTER\r\n$7\r\nKEYSLOT\r\n$%d\r\n%s\r\n", len(k), k)
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write(req); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		want, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, ":")))
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %q", k, line)
		}
		if got := Of(k); got != want {
			t.Errorf("key %d %q: slot %d, redis-server's %d", i, k, got, want)
		}
	}
}

func TestMap(t *testing.T) {
	a, b := strings.Repeat("a", 40), strings.Repeat("b", 40)
	m, err := NewMap(7, []Node{{ID: b, IP: "10.0.0.2", Port: 2}, {ID: a, IP: "10.0.0.1", Port: 1}},
		[]Range{{First: 100, Last: 16383, Owner: b}, {First: 0, Last: 49, Owner: a}, {First: 50, Last: 99, Owner: a, State: Moving}})
	if err != nil {
		t.Fatal(err)
	}
	if m.Nodes[0].ID != a || m.Ranges[0].First != 0 {
		t.Errorf("not sorted: %+v %+v", m.Nodes, m.Ranges)
	}
	for _, tt := range []struct {
		self string
		slot int
		want Verdict
		at   string
	}{
		{a, 0, Serve, a}, {a, 49, Serve, a}, {a, 50, TryAgain, a}, {b, 99, TryAgain, a},
		{a, 100, Moved, b}, {b, 100, Serve, b}, {b, 0, Moved, a}, {a, 16383, Moved, b},
	} {
		v, n := m.Route(tt.self, tt.slot)
		if v != tt.want || n == nil || n.ID != tt.at {
			t.Errorf("Route(%.1s, %d) = %v %v, want %v at %.1s", tt.self, tt.slot, v, n, tt.want, tt.at)
		}
	}
	if m.Owns(a) != 100 || m.Owns(b) != N-100 || m.Assigned() != N || m.Serving() != 2 || m.OwnsAll(a) {
		t.Errorf("Owns %d %d Assigned %d Serving %d", m.Owns(a), m.Owns(b), m.Assigned(), m.Serving())
	}
	part, _ := NewMap(1, []Node{{ID: a}}, []Range{{First: 10, Last: 10, Owner: a}})
	if v, _ := part.Route(a, 11); v != Unassigned || part.Assigned() != 1 {
		t.Errorf("slot 11 of a partial map: %v", v)
	}
	if !Single(Node{ID: a}).OwnsAll(a) {
		t.Error("Single does not own all")
	}
	for _, bad := range [][]Range{
		{{First: 0, Last: 10, Owner: a}, {First: 10, Last: 20, Owner: a}},
		{{First: 0, Last: N, Owner: a}},
		{{First: 5, Last: 4, Owner: a}},
		{{First: 0, Last: 1, Owner: b}},
	} {
		if _, err := NewMap(0, []Node{{ID: a}}, bad); err == nil {
			t.Errorf("NewMap accepted %+v", bad)
		}
	}
	if _, err := NewMap(0, []Node{{ID: "xyz"}}, nil); err == nil {
		t.Error("NewMap accepted a bad id")
	}
}

// TestLoadID: made once, kept, and the same after a restart; a file
// that holds something else stops the start.
func TestLoadID(t *testing.T) {
	dir := t.TempDir()
	id, err := LoadID(dir)
	if err != nil || !ValidID(id) {
		t.Fatalf("LoadID = %q, %v", id, err)
	}
	again, err := LoadID(dir)
	if err != nil || again != id {
		t.Errorf("second LoadID = %q, %v; want %q", again, err, id)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("dir holds %d files, want the id file alone", len(entries))
	}
	os.WriteFile(filepath.Join(dir, IDFile), []byte("nope\n"), 0o644)
	if _, err := LoadID(dir); err == nil {
		t.Error("LoadID accepted a bad file")
	}
}

// TestCRC16Sliced: the CRC eight bytes at a time is the CRC a byte at a
// time (Redis's src/crc16.c), on random bytes of every length up to 300.
func TestCRC16Sliced(t *testing.T) {
	rnd := rand.New(rand.NewPCG(testseed.Get(t), 3))
	bytewise := func(b []byte) uint16 {
		var crc uint16
		for _, c := range b {
			crc = crc<<8 ^ crc16Tables[0][byte(crc>>8)^c]
		}
		return crc
	}
	for n := range 300 {
		for range 20 {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rnd.UintN(256))
			}
			if got, want := crc16(b), bytewise(b); got != want {
				t.Fatalf("crc16 of %x: %#x, want %#x", b, got, want)
			}
		}
	}
}

func BenchmarkOf(b *testing.B) {
	key := []byte("{user1000}.following")
	b.ReportAllocs()
	for b.Loop() {
		Of(key)
	}
}

// BenchmarkOfLong: a key of 512 bytes without a tag (TestBounds's).
func BenchmarkOfLong(b *testing.B) {
	key := []byte(strings.Repeat("x", 512))
	b.ReportAllocs()
	b.SetBytes(int64(len(key)))
	for b.Loop() {
		Of(key)
	}
}
