// Package testseed is the tests' one way to seed generated inputs: a
// fresh seed each run, logged, so that a failure names the inputs that
// made it, and the environment variable TEST_SEED to make them again.
// (Not IDSERVER_TEST_SEED: the servers a test starts inherit its
// environment, and refuse an IDSERVER_ variable that names no key.)
package testseed

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// Get returns the seed of t's generated inputs, and logs it:
// TEST_SEED if it is set, else a random one.
func Get(t testing.TB) uint64 {
	t.Helper()
	seed := rand.Uint64()
	if s, err := strconv.ParseUint(os.Getenv("TEST_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (TEST_SEED=%d replays it)", seed, seed)
	return seed
}
