package respserver

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestBulkIDsMatchesStrconv(t *testing.T) {
	ids := []int64{0, 7, 99999999, 100000000, 100000001, 199999999, 200000000, 787082868470841634, 999999999999999999, math.MaxInt64}
	r := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		ids = append(ids, r.Int64())
	}
	// Runs of consecutive IDs, as MGETID makes, across a change of the
	// leading digits.
	for id := int64(787082868399999990); id < 787082868400000010; id++ {
		ids = append(ids, id)
	}
	var f bulkIDs
	var got, want []byte
	for _, id := range ids {
		got, want = f.append(got[:0], id), appendBulkID(want[:0], id)
		if string(got) != string(want) {
			t.Fatalf("id %d: %q, want %q", id, got, want)
		}
	}
}
