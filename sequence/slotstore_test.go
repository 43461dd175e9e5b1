package sequence

import (
	"context"
	"maps"
	"path/filepath"
	"testing"
)

// TestSlotGensKept: what SetSlotGens and SetSlotSeen store is read back
// by a restart, through a fold and a graceful stop, a slot set to 0
// leaves, and a slot write leaves the clean flag as it was.
func TestSlotGensKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seq")
	f, _, _, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := f.SetSlotGens(ctx, map[int]int64{1: 5, 16383: 7, 42: 9}); err != nil {
		t.Fatal(err)
	}
	if err := f.SetSlotGens(ctx, map[int]int64{42: 0}); err != nil {
		t.Fatal(err)
	}
	if err := f.SetSlotSeen(map[int][]byte{3: []byte("three")}); err != nil {
		t.Fatal(err)
	}
	f.Take(ctx, []Take{{Key: "a", N: 10, Born: true}})
	if err := <-f.Fold(func() []Mark { return []Mark{{Key: "a", Value: 10, Born: true}} }); err != nil {
		t.Fatal(err)
	}
	if err := f.Release(ctx, []Mark{{Key: "a", Value: 3, Reserved: 10, Born: true}}); err != nil {
		t.Fatal(err)
	}
	if err := f.SetSlotGens(ctx, map[int]int64{2: 11}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	g, marks, r, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if want := map[int]int64{1: 5, 16383: 7, 2: 11}; !maps.Equal(g.SlotGens(), want) {
		t.Errorf("slot gens read back: %v, want %v", g.SlotGens(), want)
	}
	if s := g.SlotSeen(); len(s) != 1 || string(s[3]) != "three" {
		t.Errorf("slot seen read back: %v", s)
	}
	if !r.Clean || len(marks) != 1 || marks[0].Value != 3 {
		t.Errorf("after a slot write behind a graceful stop: clean %v, marks %+v; want clean, a at 3", r.Clean, marks)
	}
}
