package seqmarks

import (
	"testing"

	"github.com/idserver/idserver/slots"
)

// TestSlotTerms: a take is used only if its key's slot was served all the
// while it ran: not once the slot stopped being served, nor once it
// became the server's again (a new term), nor if it was not served when
// the take began.
func TestSlotTerms(t *testing.T) {
	s := &Sequences{clustered: true}
	all, none := make([]bool, slots.N), make([]bool, slots.N)
	for i := range all {
		all[i] = true
	}
	const key = "k"
	s.slots.serve(none)
	if s.slots.still(key, s.slots.begin(key)) {
		t.Fatal("a take of a key of a slot not served is used")
	}
	s.slots.serve(all)
	term := s.slots.begin(key)
	if !s.slots.still(key, term) {
		t.Fatal("a take of a key of a slot served all along is not used")
	}
	s.slots.serve(none)
	if s.slots.still(key, term) {
		t.Fatal("a take is used though its key's slot is served no more")
	}
	s.slots.serve(all)
	if s.slots.still(key, term) {
		t.Fatal("a take begun before its key's slot became the server's again is used")
	}
}
