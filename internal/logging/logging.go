// Package logging builds idserver's one logger, which main passes down:
// human-readable lines on a terminal, JSON otherwise, at Redis's level
// names (loglevel).
package logging

import (
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/idserver/idserver/conf"
)

// New logs human-readable lines on a terminal and JSON otherwise, at
// Redis's level names.
func New(level conf.LogLevel) zerolog.Logger {
	lvl := [...]zerolog.Level{conf.LogDebug: zerolog.DebugLevel, conf.LogVerbose: zerolog.DebugLevel, conf.LogNotice: zerolog.InfoLevel, conf.LogWarning: zerolog.WarnLevel}[level]
	var log zerolog.Logger
	if isatty.IsTerminal(os.Stderr.Fd()) {
		log = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.DateTime})
	} else {
		log = zerolog.New(os.Stderr)
	}
	return log.Level(lvl).With().Timestamp().Logger()
}
