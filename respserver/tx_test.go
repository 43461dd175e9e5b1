package respserver

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/idgen/idgentest"
)

// TestTransactionIDsConsecutive: the IDs of one transaction are taken at
// EXEC, in one step: on a stopped clock their shards are consecutive,
// another client's GETID sent between MULTI and EXEC comes before them,
// and the next one after them.
func TestTransactionIDsConsecutive(t *testing.T) {
	clk := idgentest.NewClock(time.Now())
	s, addr := startServer(t, idgen.Settings{Clock: clk}, Options{})
	a, b := dialRaw(t, addr), dialRaw(t, addr)
	for _, cmd := range [][]string{{"MULTI"}, {"GETID"}, {"MGETID", "3"}, {"PING"}, {"GETID"}} {
		if v := a.do(cmd...); v != "OK" && v != "QUEUED" {
			t.Fatalf("%q: %v", cmd, v)
		}
	}
	before := b.do("GETID").(int64)
	replies := a.do("EXEC").([]any)
	after := b.do("GETID").(int64)
	if len(replies) != 4 || replies[2] != "PONG" {
		t.Fatalf("EXEC: %#v", replies)
	}
	ids := []int64{replies[0].(int64)}
	for _, v := range replies[1].([]any) {
		id, _ := strconv.ParseInt(v.(string), 10, 64)
		ids = append(ids, id)
	}
	ids = append(ids, replies[3].(int64))
	prev, _ := s.opts.Generator.Decode(before)
	for _, id := range append(ids, after) {
		p, _ := s.opts.Generator.Decode(id)
		if p.Time != prev.Time || p.Shard != prev.Shard+1 {
			t.Fatalf("IDs %d .. %d, then %d: not consecutive units at %d (%+v after %+v)", before, ids, after, id, p, prev)
		}
		prev = p
	}
}

// TestTransactionWaitsAsAWhole: a transaction whose IDs must wait for the
// clock waits off the loop as one: another client is answered meanwhile,
// and then every reply comes in one EXEC array, followed by what the
// client sent after EXEC.
func TestTransactionWaitsAsAWhole(t *testing.T) {
	oneLoop(t)
	_, a, b, last, clk := startWaiting(t, Options{},
		encode("MULTI")+encode("GETID")+encode("MGETID", "999")+encode("ECHO", "x")+encode("EXEC")+encode("PING"))
	for _, want := range []string{"OK", "QUEUED", "QUEUED", "QUEUED"} {
		if v := a.reply(); v != want {
			t.Fatalf("got %v, want %s", v, want)
		}
	}
	if v := b.do("PING"); v != "PONG" {
		t.Fatalf("other client's PING while the transaction waits: %v", v)
	}
	if !nothingYet(t, a) {
		t.Fatal("EXEC answered before the clock moved")
	}
	if v := b.do("INFO", "clients").(string); !strings.Contains(v, "blocked_clients:1\r\n") {
		t.Fatalf("INFO clients while the transaction waits:\n%s", v)
	}
	clk.Advance(500 * time.Millisecond)
	replies := a.reply().([]any)
	if len(replies) != 3 || replies[0].(int64) <= last || replies[2] != "x" {
		t.Fatalf("EXEC: %#v", replies)
	}
	checkIDs(t, replies[1], 999, replies[0].(int64))
	if v := a.reply(); v != "PONG" {
		t.Fatalf("PING after EXEC: %v", v)
	}
}

// TestTransactionBounds: a transaction issues at most mgetid-max IDs and
// holds at most the hard output limit; past either, the command is
// refused and EXEC discards the transaction, as for any refused command.
func TestTransactionBounds(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, Options{MGetIDMax: 100, ConnOptions: ConnOptions{Output: OutputLimits{Hard: 1 << 20, Soft: 512 << 10}}})
	c := dialRaw(t, addr)
	c.do("MULTI")
	c.do("MGETID", "60")
	if e, ok := c.do("MGETID", "41").(respError); !ok || !strings.Contains(string(e), "at most 100 IDs (mgetid-max), this one would issue 101") {
		t.Fatalf("MGETID past mgetid-max in a transaction: %v", e)
	}
	if v := c.do("EXEC"); v != respError(errExecAbort.Error()) {
		t.Fatalf("EXEC: %v", v)
	}
	c.do("MULTI")
	var refused respError
	for i := 0; i < 100 && refused == ""; i++ {
		refused, _ = c.do("ECHO", strings.Repeat("x", 60<<10)).(respError)
	}
	if !strings.Contains(string(refused), "past its hard output limit") {
		t.Fatalf("a transaction past the hard limit: %q", refused)
	}
	if v := c.do("EXEC"); v != respError(errExecAbort.Error()) {
		t.Fatalf("EXEC: %v", v)
	}
	if v := c.do("PING"); v != "PONG" {
		t.Fatalf("PING after: %v", v)
	}
}

// TestTransactionNoAuth: before AUTH, MULTI is refused, and a command
// queued without AUTH aborts the transaction.
func TestTransactionNoAuth(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, Options{RequirePass: "pw"})
	c := dialRaw(t, addr)
	if v := c.do("MULTI"); v != respError("NOAUTH Authentication required.") {
		t.Fatalf("MULTI before AUTH: %v", v)
	}
	if v := c.do("EXEC"); v != respError("EXECABORT Transaction discarded because of: NOAUTH Authentication required.") {
		t.Fatalf("EXEC before AUTH: %v", v)
	}
	c.do("AUTH", "pw")
	c.do("MULTI")
	c.do("GETID")
	if v := c.do("EXEC").([]any); len(v) != 1 {
		t.Fatalf("EXEC after AUTH: %v", v)
	}
}

// TestExecEveryCommand: every command of the table, and every subcommand,
// queued and run by EXEC with arguments enough for its arity, is answered
// with a reply of its own: none gets an internal error's text (a command
// that finishes off the loop, such as KEYS, once got "respserver: command
// must wait").
func TestExecEveryCommand(t *testing.T) {
	_, addr := startServer(t, idgen.Settings{}, withSequences(t, Options{}))
	var all []*command
	for _, cmd := range table {
		all = append(all, cmd)
		all = append(all, cmd.subs...)
	}
	for _, cmd := range all {
		args := strings.Split(cmd.name, "|")
		if cmd.control || cmd.run == nil {
			continue // runs at once, not queued (QUIT, RESET, MULTI, EXEC...); or a container alone
		}
		for len(args) < max(cmd.arity, -cmd.arity) {
			args = append(args, "x")
		}
		c := dialRaw(t, addr)
		c.do("MULTI")
		queued := c.do(args...)
		replies := []any{queued, c.do("EXEC")}
		if r, ok := replies[1].([]any); ok {
			replies = append(replies, r...)
		}
		for _, r := range replies {
			if e, ok := r.(respError); ok && (strings.Contains(string(e), "respserver") || strings.Contains(string(e), "must wait")) {
				t.Errorf("%q in EXEC: %q", args, e)
			}
		}
	}
}
