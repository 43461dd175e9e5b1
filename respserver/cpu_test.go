package respserver

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/testseed"
)

// hostileCommands are the commands an unauthenticated or authenticated
// client may send, each with the words that lead its variadic part: every
// command whose cost could depend on what follows. Generated arguments,
// rich in glob syntax, fill the rest.
var hostileCommands = [][]string{
	{"CONFIG", "GET"}, {"COMMAND", "DOCS"}, {"COMMAND", "INFO"}, {"COMMAND", "LIST", "FILTERBY", "PATTERN"},
	{"INFO"}, {"SCAN", "0", "MATCH"}, {"CLIENT", "KILL", "ADDR"}, {"CLIENT", "LIST", "ID"},
	{"CLIENT", "TRACKING", "ON", "BCAST", "PREFIX"}, {"CLIENT", "SETNAME"}, {"CLIENT", "SETINFO", "LIB-NAME"},
	{"HELLO", "3", "AUTH"}, {"AUTH"}, {"PING"}, {"ECHO"}, {"WATCH"}, {"MGETID"}, {"DECODEID"}, {"IDRANGE"},
	{"SELECT"}, {"NOSUCHCOMMAND"}, {"CLIENT", "NOSUCH"}, {"MULTI"}, {"GETID"},
	{"INCR"}, {"INCRBY", "k"}, {"GET"}, {"MGET"}, {"EXISTS"}, {"TYPE"}, {"SET", "k"}, {"SET", "k", "1"}, {"KEYS"},
	{"SCAN", "0", "TYPE"}, {"DEL"},
}

// hostilePieces are what hostile arguments are made of: glob syntax, a
// range over every byte, bytes a reply would quote.
var hostilePieces = []string{"*", "?", "[", "]", "^", "-", `\`, "a", "*?", "\x00-\xff", "[\x00-\xff", "\"", "\r\n", "\x00", "1"}

// argForm makes an argument of n bytes: piece repeated (after an opening
// '[' if open), or a random mix of pieces if piece is "".
type argForm struct {
	piece string
	open  bool
}

func (f argForm) make(r *rand.Rand, n int) string {
	var b strings.Builder
	if f.open {
		b.WriteString("[")
	}
	for b.Len() < n {
		p := f.piece
		if p == "" {
			p = hostilePieces[r.IntN(len(hostilePieces))]
		}
		b.WriteString(p)
	}
	return b.String()[:n]
}

// TestCPUPerByte sends every command that takes arguments with generated
// ones: in every form (each piece repeated, with and without an opening
// '[', and a mix) at 256 KiB, and mixed in three shapes up to 4 MiB, the
// largest command the limits set here allow. It holds the CPU each costs
// the process (the least of three tries, against noise) to an allowance
// plus a bound per byte: no command's cost grows faster than its size, or
// by a large factor per byte. The bound is many times what the costliest
// takes on a quiet machine (10 times more under -race); sets whose
// ranges were compiled byte by byte took three times the bound.
func TestCPUPerByte(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, withSequences(t, Options{
		ConnOptions: ConnOptions{QueryBufferLimit: 8 << 20},
		Config:      [][2]string{{"maxclients", "10000"}, {"port", "6551"}, {"max-lead-ms", "5000"}},
	}))
	c := newClient(t, addr, 2)
	incrAll(t, c, 2000, func(i int) string { return fmt.Sprintf("key:%06d", i) }) // for KEYS and SCAN to match
	perByte, allowance, scale := 20*time.Nanosecond, 2*time.Millisecond, 1
	if raceEnabled { // slower, and here for races rather than for costs
		perByte, allowance, scale = 10*perByte, 10*allowance, 4
	}
	seed := testseed.Get(t)
	r := rand.New(rand.NewPCG(seed, 1))
	var shapes [][]string // the arguments, made once for every command
	shape := func(n, size int, f argForm) {
		args := make([]string, n)
		for i := range args {
			args[i] = f.make(r, size/scale)
		}
		shapes = append(shapes, args)
	}
	for _, p := range hostilePieces {
		shape(16, 16<<10, argForm{p, false})
		shape(16, 16<<10, argForm{p, true})
	}
	shape(16, 16<<10, argForm{})
	shape(64, 64<<10, argForm{})
	shape(1000, 1<<10, argForm{})
	shape(1024, 8*scale, argForm{})
	var worst struct {
		ns   float64
		what string
	}
	for _, words := range hostileCommands {
		for _, sh := range shapes {
			args := slices.Concat(words, sh[:min(len(sh), 1024-len(words))]) // proto-max-multibulk-len
			cmd := encode(args...)
			what := fmt.Sprintf("%s with %d arguments of %d bytes %+q (%d bytes)", strings.Join(words, " "), len(args)-len(words), len(sh[0]), sh[0][:min(len(sh[0]), 8)], len(cmd))
			// The least of three tries: on a busy machine a try now and
			// then costs a few ms more, of noise.
			cpu := time.Duration(math.MaxInt64)
			for range 3 {
				c := dialRaw(t, addr)
				cpu0 := cpuTime(t)
				c.send(cmd)
				if err, ok := c.reply().(error); ok && strings.Contains(err.Error(), "closed") {
					t.Fatalf("%s: %v", what, err)
				}
				cpu = min(cpu, cpuTime(t)-cpu0)
				c.conn.Close()
			}
			if cpu > allowance+time.Duration(len(cmd))*perByte {
				t.Errorf("%s: %v of CPU, over %v + %v per byte", what, cpu, allowance, perByte)
			}
			if ns := float64(cpu) / float64(len(cmd)); ns > worst.ns {
				worst.ns, worst.what = ns, what+": "+cpu.String()
			}
		}
	}
	t.Logf("costliest per byte: %.1f ns/byte, %s", worst.ns, worst.what)
}
