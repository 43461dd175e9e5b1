// Package idgentest provides a clock that tests move by hand, for
// generators (idgen.Settings.Clock) under test in other packages: a
// request that waits for the clock then waits until the test says so,
// however fast or slow the machine runs.
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

// Sleep blocks until Advance has moved the clock d past where it was.
func (c *Clock) Sleep(d time.Duration) {
	c.mu.Lock()
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
