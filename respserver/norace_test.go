//go:build !race

package respserver

// raceEnabled: see race_test.go.
const raceEnabled = false
