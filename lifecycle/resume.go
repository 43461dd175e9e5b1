package lifecycle

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/idserver/idserver/conf"
	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/reservation"
)

// maxWait is max-wait-ms for idgen: 0 there means the default, and
// max-wait-ms 0 means refuse at once rather than wait.
func maxWait(cfg *conf.Config) time.Duration {
	if cfg.MaxWait.Duration == 0 {
		return -1
	}
	return cfg.MaxWait.Duration
}

// openState locks the state file, reads where the last run stopped, and
// returns a generator that starts above it and issues nothing until the
// keeper has a reservation on disk, and a function that logs where it
// resumed from (once the start is sure to go on).
func openState(cfg *conf.Config, identity reservation.State, log zerolog.Logger) (*reservation.FileStore, *idgen.Generator, func(), error) {
	store, err := reservation.OpenFile(filepath.Join(cfg.Dir, cfg.StateFile), log)
	if err != nil {
		return nil, nil, nil, err
	}
	resumed, err := store.Resume(identity)
	if err != nil {
		store.Close()
		return nil, nil, nil, fmt.Errorf("%w (the file is left as it is)", err)
	}
	now := time.Now().UnixMilli() + cfg.DebugClockOffset.Milliseconds() - cfg.EpochMs
	floor := resumed.Floor(now, cfg.MaxLead.Duration)
	gen, err := idgen.New(idgen.Settings{
		Layout:      identity.Layout,
		Epoch:       cfg.Epoch(),
		ServerID:    identity.ServerID,
		MaxLead:     cfg.MaxLead.Duration,
		MaxWait:     maxWait(cfg),
		Floor:       floor,
		Ceiling:     max(floor, 1),
		ClockOffset: cfg.DebugClockOffset.Duration,
	})
	if err != nil {
		store.Close()
		return nil, nil, nil, err
	}
	return store, gen, func() { logResumption(log, resumed, store.Path(), gen, floor, cfg) }, nil
}

// logResumption says where the start resumed from when it was not a plain
// restart: from the lock file's copy (the state file is gone), from
// nothing (a first start), or from a reservation so far ahead of the clock
// that requests will be refused for a while.
func logResumption(log zerolog.Logger, r reservation.Resumed, statePath string, gen *idgen.Generator, floor int64, cfg *conf.Config) {
	switch r.From {
	case "":
		log.Info().Str("state_file", statePath).Int64("max_lead_ms", cfg.MaxLead.Milliseconds()).
			Msg("no state file: a first start on this dir; IDs begin max-lead-ms ahead of the clock, above anything a server whose state file was deleted could have issued")
	case statePath:
	default:
		log.Warn().Str("state_file", statePath).Str("from", r.From).
			Msg("the state file is missing; resuming from the copy of the reservation in the lock file")
	}
	// A restart jumps at most the previous run's lead plus reserve-ms
	// ahead of the clock; further means the clock went back while the
	// server was down. The lead is counted from the reservation until the
	// clock gets there, so max-lead-ms worth of IDs go out at once, and
	// then requests get -BUSY until the clock reaches it.
	ahead := floor - gen.Now()
	if ahead <= cfg.MaxLead.Milliseconds()+cfg.ReserveAhead.Milliseconds() {
		return
	}
	at := cfg.Epoch().Add(time.Duration(floor) * time.Millisecond).UTC()
	budget := (cfg.MaxLead.Milliseconds() + 1) << cfg.ShardRange // the floor's millisecond and max-lead-ms more
	log.Warn().Int64("ahead_ms", ahead).Str("available_at", at.Format(time.RFC3339Nano)).Int64("ids_before_then", budget).
		Msgf("the reservation is %s ahead of the clock (was the clock set back while the server was down?): "+
			"until the clock reaches it at %s, this server can issue at most %d IDs (max-lead-ms %d at 2^%d per ms); past those, requests get -BUSY until then",
			time.Duration(ahead)*time.Millisecond, at.Format(time.RFC3339), budget, cfg.MaxLead.Milliseconds(), cfg.ShardRange)
}
