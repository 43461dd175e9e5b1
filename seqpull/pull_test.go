package seqpull

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/idserver/idserver/sequence"
	"github.com/idserver/idserver/slots"
)

// TestPullEndsWithItsContext: an old owner that accepts the connection
// and never answers (a host cut off, a process stopped) holds a pull no
// longer than the caller's context, not go-redis's own socket timeouts
// (5 s: the INCRs waiting for the slots' take timed out so).
func TestPullEndsWithItsContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // read nothing, answer nothing
		}
	}()
	addr := ln.Addr().(*net.TCPAddr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a pull's whole bound: the PING's is ReachWait
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Pull(ctx, Config{}, slots.Node{ID: "n", IP: "127.0.0.1", Port: addr.Port}, []int{1, 2})
		done <- err
	}()
	// Generous against a busy machine (ReachWait is 1 s), and well under
	// the 5 s the pull took before.
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Pull from an owner that never answers: no error")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Pull from an owner that never answers outlived its context by 3 s")
	}
}

// TestPartsWithinMaxArgs: a list of slots goes out in commands the other
// servers accept: none longer than proto-max-multibulk-len (which may be
// as low as 16), each slot once, in order.
func TestPartsWithinMaxArgs(t *testing.T) {
	list := make([]int, 1000)
	for i := range list {
		list[i] = i
	}
	for _, maxArgs := range []int{0, 16, 100, 1024, 1 << 20} {
		var joined []int
		for _, part := range (Config{MaxArgs: maxArgs}).parts(list, 2) {
			if args := 2 + len(part); (maxArgs > 0 && args > maxArgs) || len(part) > perCommand {
				t.Fatalf("MaxArgs %d: a command of %d arguments", maxArgs, args)
			}
			joined = append(joined, part...)
		}
		if !slices.Equal(joined, list) {
			t.Fatalf("MaxArgs %d: the parts join to %v", maxArgs, joined)
		}
	}
}

// TestGatherPages: slots gathered over pages come whole; a slot whose
// generation changed between its pages (the old owner dropped it, or
// served it again) comes with Gen 0, not handed over; a page that does
// not move on is an error, not a loop.
func TestGatherPages(t *testing.T) {
	mark := func(k string) sequence.Mark { return sequence.Mark{Key: k, Value: 1, Born: true} }
	pages := map[[2]int]sequence.Handed{ // by slot and place
		{1, 0}: {Slot: 1, Gen: 5, Marks: []sequence.Mark{mark("a")}, Next: 1},
		{1, 1}: {Slot: 1, Gen: 5, Marks: []sequence.Mark{mark("b")}},
		{2, 0}: {Slot: 2, Gen: 7, Marks: []sequence.Mark{mark("c")}, Next: 1},
		{2, 1}: {Slot: 2, Gen: 8, Marks: []sequence.Mark{mark("d")}},
		{3, 0}: {Slot: 3, Gen: 0},
	}
	page := func(from int, list []int) ([]sequence.Handed, error) {
		return []sequence.Handed{pages[[2]int{list[0], from}]}, nil // a slot a page
	}
	got, err := Gather([]int{1, 2, 3}, page)
	if err != nil {
		t.Fatal(err)
	}
	want := []sequence.Handed{{Slot: 1, Gen: 5, Marks: []sequence.Mark{mark("a"), mark("b")}}, {Slot: 2}, {Slot: 3}}
	if len(got) != len(want) {
		t.Fatalf("gathered %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Slot != want[i].Slot || got[i].Gen != want[i].Gen || !slices.Equal(got[i].Marks, want[i].Marks) {
			t.Fatalf("gathered %+v, want %+v", got, want)
		}
	}
	stuck := func(from int, list []int) ([]sequence.Handed, error) {
		return []sequence.Handed{{Slot: list[0], Gen: 1, Next: max(from, 1)}}, nil
	}
	if _, err := Gather([]int{1}, stuck); err == nil {
		t.Fatal("a page that does not move on: no error")
	}
}
