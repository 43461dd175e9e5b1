package idgen

import "time"

// StepConfirm is how long the clock must hold a forward step of more than
// max-lead-ms before a Generator follows it. Until then the generator
// keeps to the monotonic clock, counting on from where it stood; a step
// corrected within it (a wrong time source that NTP puts right, DEBUG
// CLOCK-OFFSET and back) costs nothing. Followed at once, a step of a day
// and its correction would leave the IDs a day ahead of the clock, and
// every request past max-lead-ms refused for that day.
const StepConfirm = time.Minute

// steps is how a Generator follows the clock: as it reads, through steps
// back (IDs then continue from the last one, see Next) and forward steps
// that take it no more than max-lead-ms past the furthest time it has
// followed (so the correction of a step back is followed at once); a
// larger forward step only once it has held for StepConfirm.
type steps struct {
	last    int64     // the clock as followed at the last reading, ms since the epoch
	anchor  int64     // the furthest time followed, as of the reading at
	at      time.Time // that reading: the furthest time moves on with monotonic time
	pending time.Time // the reading a held step was first seen at; zero: none
	ahead   int64     // how far the clock is ahead of the time followed, while held
}

// follow returns the time to go by, ms since the epoch, for the clock
// reading t, which is wall. Most calls cost its first test: the clock ran
// on by no more than max-lead-ms since the last reading, so it cannot
// have stepped further; check moves the anchor on once a second, so that
// the wall clock's slow drift from the monotonic one never adds up to a
// step.
func (s *steps) follow(wall int64, t time.Time, maxLead int64, st *Stats) int64 {
	if d := wall - s.last; d >= 0 && d <= maxLead && s.pending.IsZero() && wall-s.anchor < 1000 {
		s.last = wall
		return wall
	}
	return s.check(wall, t, maxLead, st)
}

// check is follow for a reading that moved the clock back, or on by more
// than max-lead-ms, or while a step is held, or a second past the anchor.
// It counts each forward step it holds back in st.
func (s *steps) check(wall int64, t time.Time, maxLead int64, st *Stats) int64 {
	// t.Sub is monotonic with the system clock; a test clock, which has no
	// monotonic reading, is its own.
	furthest := s.anchor + t.Sub(s.at).Milliseconds()
	if wall-furthest <= maxLead || !s.pending.IsZero() && t.Sub(s.pending) >= StepConfirm {
		s.anchor, s.at = max(wall, furthest), t
		s.last, s.pending, s.ahead = wall, time.Time{}, 0
		return wall
	}
	if s.pending.IsZero() {
		s.pending = t
		st.ForwardSteps++
		st.LastForwardStep = time.Duration(wall-furthest) * time.Millisecond
	}
	s.ahead = wall - furthest
	return furthest
}
