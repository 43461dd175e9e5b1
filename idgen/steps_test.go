package idgen

import (
	"errors"
	"testing"
	"time"
)

// TestForwardStepHeld: the clock steps a day forward, as a wrong time
// source would. The generator keeps to the time it went by (moving with
// the monotonic clock), counts the step, and when the clock is put right
// within StepConfirm, nothing happened: no ID a day ahead, no refusal
// after. A step within max-lead-ms is followed at once.
func TestForwardStepHeld(t *testing.T) {
	g, c := newFake(t, Settings{MaxLead: 100 * time.Millisecond, MaxWait: -1}, 1000)
	next := func() int64 {
		t.Helper()
		id, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		return ms(mustDecode(t, g, id))
	}
	if got := next(); got != 1000 {
		t.Fatalf("first ID at %d ms, want 1000", got)
	}
	g.SetClockOffset(24 * time.Hour)
	c.Advance(30 * time.Second) // half of StepConfirm passes, on both clocks
	if got := next(); got != 31_000 {
		t.Fatalf("ID at %d ms with the clock a day ahead, want 31000: the day is held back", got)
	}
	if st := g.Stats(); st.ForwardSteps != 1 || st.LastForwardStep != 24*time.Hour || st.StepHeld != 24*time.Hour {
		t.Fatalf("stats %+v: want one forward step of a day, held", st)
	}
	g.SetClockOffset(0) // put right
	c.Advance(time.Millisecond)
	if got := next(); got != 31_001 {
		t.Fatalf("ID at %d ms after the clock was put right, want 31001", got)
	}
	if st := g.Stats(); st.StepHeld != 0 || st.ClockSteps != 0 || st.Refused != 0 {
		t.Fatalf("stats %+v after the step was put right: want nothing held, no step back, nothing refused", st)
	}
	g.SetClockOffset(50 * time.Millisecond) // within max-lead-ms: followed
	if got := next(); got != 31_051 {
		t.Fatalf("ID at %d ms after a 50 ms step, want 31051", got)
	}
}

// TestForwardStepConfirmed: a forward step that holds for StepConfirm is
// followed, and counted once.
func TestForwardStepConfirmed(t *testing.T) {
	g, c := newFake(t, Settings{MaxLead: 100 * time.Millisecond, MaxWait: -1}, 1000)
	g.SetClockOffset(time.Hour)
	if _, err := g.Next(); err != nil {
		t.Fatal(err)
	}
	c.Advance(StepConfirm - time.Millisecond)
	id, err := g.Next()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ms(mustDecode(t, g, id)), int64(1000)+StepConfirm.Milliseconds()-1; got != want {
		t.Fatalf("ID at %d ms just before StepConfirm, want %d", got, want)
	}
	c.Advance(time.Millisecond)
	id, err = g.Next()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ms(mustDecode(t, g, id)), int64(1000)+StepConfirm.Milliseconds()+time.Hour.Milliseconds(); got != want {
		t.Fatalf("ID at %d ms once the step held for StepConfirm, want %d", got, want)
	}
	if st := g.Stats(); st.ForwardSteps != 1 || st.StepHeld != 0 {
		t.Fatalf("stats %+v: want the step counted once, and followed", st)
	}
	if _, err := g.Next(); errors.Is(err, ErrLeadExceeded) {
		t.Fatal(err)
	}
}

// TestStepBackPutRight: the clock steps back 8 s, past max-lead-ms, and is
// put right: the forward step that puts it right is followed at once, as
// it takes the clock no further than it had been.
func TestStepBackPutRight(t *testing.T) {
	g, c := newFake(t, Settings{MaxLead: 5 * time.Second, MaxWait: -1}, 100_000)
	if _, err := g.Next(); err != nil {
		t.Fatal(err)
	}
	g.SetClockOffset(-8 * time.Second)
	c.Advance(2 * time.Second)
	if _, err := g.Next(); !errors.Is(err, ErrLeadExceeded) {
		t.Fatalf("Next 8 s after the last ID: %v, want the lead bound", err)
	}
	g.SetClockOffset(0)
	if _, err := g.Next(); err != nil {
		t.Fatalf("Next once the clock is put right: %v", err)
	}
	if st := g.Stats(); st.ForwardSteps != 0 || st.ClockSteps != 1 {
		t.Fatalf("stats %+v: want one step back and no forward step held", st)
	}
}
