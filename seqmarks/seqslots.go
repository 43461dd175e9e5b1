package seqmarks

import (
	"sync"
	"sync/atomic"

	"github.com/idserver/idserver/sequence"
	"github.com/idserver/idserver/slotassign"
	"github.com/idserver/idserver/slots"
)

// slotTerms is what a Redis Cluster server's sequences know of the slots
// it serves: which, and for each, a term counted up each time the slot
// becomes its. A take is used only if its key's slot was this server's
// all the while it ran (the same term, still served): a take begun
// before the slot became its may reserve values below those another
// server handed out meanwhile.
type slotTerms struct {
	mu     sync.Mutex // one ServeSlots at a time
	served atomic.Pointer[[]bool]
	term   [slots.N]atomic.Uint32
}

// begin is the term of key's slot, for a take that begins.
func (st *slotTerms) begin(key string) uint32 {
	return st.term[slots.Of([]byte(key))].Load()
}

// still reports whether key's slot is served, in the term a take began
// in.
func (st *slotTerms) still(key string, term uint32) bool {
	s := slots.Of([]byte(key))
	served := st.served.Load()
	return served != nil && (*served)[s] && st.term[s].Load() == term
}

// ServeSlots is given what this server serves each time the slot keeper
// reads the assignment, before the server answers from it: the slots
// that become its get a new term, and table drops the values it holds of
// their keys; from then on, takes check the slot of each key (see
// slotTerms). nil serves nothing.
func (s *Sequences) ServeSlots(sv *slotassign.Serving, table *sequence.Table) {
	var now []bool
	if sv != nil {
		now = sv.Slots()
	}
	if gained := s.slots.serve(now); gained != nil {
		table.Drop(func(key string) bool { return gained[slots.Of([]byte(key))] })
	}
}

// serve makes now the slots served (nil: none) and returns those that
// became served, each with a new term; nil if none did.
func (st *slotTerms) serve(now []bool) (gained []bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if now == nil {
		now = make([]bool, slots.N)
	}
	before := st.served.Load()
	for i, on := range now {
		if on && (before == nil || !(*before)[i]) {
			if gained == nil {
				gained = make([]bool, slots.N)
			}
			gained[i] = true
			st.term[i].Add(1)
		}
	}
	st.served.Store(&now)
	return gained
}
