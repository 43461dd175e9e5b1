// Package idgentest provides the clock that tests move by hand, for
// generators (idgen.Settings.Clock) under test, in idgen and elsewhere: a
// request that waits for the clock then waits until the test says so,
// however fast or slow the machine runs; or, for idgen's own tests of
// waits, Sleep returns at once and counts what was slept.
package idgentest

import (
	"sync"
	"time"
)

// Clock is an idgen.Clock that stands still until Advance moves it.
type Clock struct {
	mu       sync.Mutex
	now      time.Time
	moved    chan struct{} // closed and replaced by every Advance
	sleepers int
	mode     SleepMode
	slept    time.Duration
}

// SleepMode is what a Clock's Sleep does.
type SleepMode int

// The modes of Sleep.
const (
	// SleepBlocks waits until Advance has moved the clock past the
	// sleep's end: the default.
	SleepBlocks SleepMode = iota
	// SleepReturns returns at once, the clock unmoved.
	SleepReturns
	// SleepAdvances returns at once, having moved the clock as far.
	SleepAdvances
)

// SetSleep sets what Sleep does.
func (c *Clock) SetSleep(m SleepMode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mode = m
}

// Slept is the time every Sleep so far asked for.
func (c *Clock) Slept() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slept
}

// Set sets the clock to t, as a clock step would.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(t.Sub(c.now))
}

// NewClock returns a Clock reading t.
func NewClock(t time.Time) *Clock {
	return &Clock{now: t, moved: make(chan struct{})}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep sleeps d as the clock's SleepMode says.
func (c *Clock) Sleep(d time.Duration) {
	c.mu.Lock()
	c.slept += d
	switch c.mode {
	case SleepReturns:
		c.mu.Unlock()
		return
	case SleepAdvances:
		c.advance(d)
		c.mu.Unlock()
		return
	}
	until := c.now.Add(d)
	c.sleepers++
	defer func() {
		c.sleepers--
		c.mu.Unlock()
	}()
	for c.now.Before(until) {
		moved := c.moved
		c.mu.Unlock()
		<-moved
		c.mu.Lock()
	}
}

// Advance moves the clock forward by d (back, if d is negative) and wakes
// the sleepers it has moved past their time.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(d)
}

// advance is Advance with c.mu held.
func (c *Clock) advance(d time.Duration) {
	c.now = c.now.Add(d)
	close(c.moved)
	c.moved = make(chan struct{})
}

// Sleepers returns how many goroutines are in Sleep now.
func (c *Clock) Sleepers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sleepers
}

// AwaitSleepers waits until n goroutines are in Sleep, for at most
// timeout, and reports whether they are.
func (c *Clock) AwaitSleepers(n int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for c.Sleepers() < n {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}
