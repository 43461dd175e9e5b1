// Package ratelog keeps repeated failures from flooding the log: a store
// failing on every tick (a full disk: 60 times a second) is one line at
// once, then one every Every, while a new error is news at once.
package ratelog

import "time"

// Every is how often one error text is let through again while it
// repeats.
const Every = 10 * time.Second

// ByText lets through the first failure of each error text, and then one
// every Every, with how many of that text it held back. Its zero value is
// ready; it is not safe for concurrent use.
type ByText struct {
	last map[string]time.Time
	held map[string]int
}

// Allow reports whether text may be logged at now and, if so, how many
// of it were held back since it last was.
func (l *ByText) Allow(text string, now time.Time) (ok bool, held int) {
	if l.last == nil || len(l.last) > 64 { // bounded: errors may carry varying details
		l.last, l.held = map[string]time.Time{}, map[string]int{}
	}
	if last, seen := l.last[text]; seen && now.Sub(last) < Every {
		l.held[text]++
		return false, 0
	}
	held = l.held[text]
	l.last[text], l.held[text] = now, 0
	return true, held
}
