//go:build race

package respserver

// raceEnabled: the race detector slows memory-heavy code about tenfold,
// and CPU bounds in tests allow for it.
const raceEnabled = true
