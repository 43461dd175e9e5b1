package respserver

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/idserver/idserver/idgen"
)

// TestScriptsRefused: every scripting command and subcommand gets the
// error that names what to use instead, never "ERR unknown command"
// (Redisson resends EVALSHA on that at once, without end), inside MULTI
// too, and each call is counted in INFO's script_calls_refused; SCRIPT
// alone is Redis's arity error, not counted.
func TestScriptsRefused(t *testing.T) {
	srv, addr := startServer(t, idgen.Settings{}, Options{})
	c := newClient(t, addr, 2)
	ctx := context.Background()
	sha := strings.Repeat("a", 40)
	calls := [][]any{
		{"EVAL", "return 1", 0}, {"evalsha", sha, 1, "k"}, {"EVAL_RO", "return 1", 0}, {"EVALSHA_RO", sha, 0},
		{"FCALL", "f", 0}, {"FCALL_RO", "f", 0},
	}
	for _, sub := range []string{"LOAD", "EXISTS", "FLUSH", "KILL", "DEBUG", "HELP"} {
		calls = append(calls, []any{"SCRIPT", sub, "x"})
	}
	for _, sub := range []string{"LOAD", "DELETE", "DUMP", "FLUSH", "KILL", "LIST", "RESTORE", "STATS", "HELP"} {
		calls = append(calls, []any{"FUNCTION", sub})
	}
	for _, args := range calls {
		want := "ERR idserver does not run scripts (" + strings.ToUpper(args[0].(string)) + "): "
		err := c.Do(ctx, args...).Err()
		if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "use GETID or MGETID for IDs and INCR or INCRBY for counters") {
			t.Errorf("%v: %v, want %q...", args, err, want)
		}
	}
	tx := c.TxPipeline()
	tx.Do(ctx, "EVALSHA", sha, 0)
	tx.Do(ctx, "GETID")
	cmds, _ := tx.Exec(ctx)
	if len(cmds) != 2 || cmds[0].Err() == nil || !strings.HasPrefix(cmds[0].Err().Error(), "ERR idserver does not run scripts (EVALSHA)") || cmds[1].Err() != nil {
		t.Errorf("EVALSHA, GETID in MULTI: %v", cmds)
	}
	if err := c.Do(ctx, "SCRIPT").Err(); err == nil || err.Error() != "ERR wrong number of arguments for 'script' command" {
		t.Errorf("SCRIPT: %v", err)
	}
	want := int64(len(calls) + 1)
	if got := srv.Stats().Scripts; got != uint64(want) {
		t.Errorf("Stats().Scripts %d, want %d", got, want)
	}
	for _, f := range infoFields(t, addr, "stats") {
		if f[0] == "script_calls_refused" {
			if f[1] != strconv.FormatInt(want, 10) {
				t.Errorf("INFO script_calls_refused:%s, want %d", f[1], want)
			}
			return
		}
	}
	t.Error("INFO stats has no script_calls_refused")
}
