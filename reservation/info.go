package reservation

import (
	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/stats"
)

// Info is INFO's persistence section: where the reservation is kept (a
// field that names it: state_file, or etcd_reservations in cluster mode),
// how far it reaches, and the keeper's counters k. gen is the generator it
// reserves for; nil while there is none (a cluster mode standby).
func Info(where stats.Field, epochMs int64, gen *idgen.Generator, k Stats) []stats.Field {
	var ceiling, ahead int64
	if gen != nil {
		ceiling = gen.Stats().Ceiling
		ahead = ceiling - gen.Now()
	}
	return []stats.Field{
		where,
		stats.G("reserved_until_ms", epochMs+ceiling, "The reservation stored: no ID's time reaches it (the epoch while none is held)."),
		stats.G("reserved_ahead_ms", ahead, "How far the reservation stored is ahead of the clock."),
		stats.C("reservation_saves", k.Saves, "Reservations stored."),
		stats.C("reservation_save_failures", k.Failures, "Reservation writes that failed."),
		stats.G("last_save_usec", k.LastSave.Microseconds(), "How long the last reservation write took."),
	}
}
