package logging

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/idserver/idserver/conf"
)

// TestLevels: each of Redis's level names logs at its zerolog level
// (mapped by hand: zerolog's names are not Redis's).
func TestLevels(t *testing.T) {
	for level, want := range map[conf.LogLevel]zerolog.Level{
		conf.LogDebug:   zerolog.DebugLevel,
		conf.LogVerbose: zerolog.DebugLevel,
		conf.LogNotice:  zerolog.InfoLevel,
		conf.LogWarning: zerolog.WarnLevel,
	} {
		if got := New(level).GetLevel(); got != want {
			t.Errorf("loglevel %s: %s, want %s", level, got, want)
		}
	}
}
