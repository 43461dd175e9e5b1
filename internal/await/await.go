// Package await is the tests' one way to wait for a condition: poll it
// until it holds, within a deadline generous enough for a busy machine
// (the suite must pass beside two CPU hogs), and fail the test, saying
// what did not happen, if it never does. A test states the condition it
// needs instead of sleeping for a time that usually suffices.
package await

import (
	"testing"
	"time"
)

// every is how often a condition is polled.
const every = 5 * time.Millisecond

// Within polls cond until it holds or d has passed, and reports whether
// it held. For a condition a test expects not to hold, or handles itself.
func Within(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(every) {
		if cond() {
			return true
		}
	}
	return cond()
}

// True fails t unless cond holds within d; what says what was awaited,
// as in "the client was closed".
func True(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(d, cond) {
		t.Fatalf("after %v, still not: %s", d, what)
	}
}
