package sequence

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/idserver/idserver/internal/testseed"
)

// reopenGens closes f and returns the slot gens OpenFile reads from its
// path.
func reopenGens(t *testing.T, f *File) map[int]int64 {
	t.Helper()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g, _, _, err := OpenFile(f.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	return g.SlotGens()
}

// TestSlotGens: SetSlotGens stores each slot's generation, 0 deleting
// it, and OpenFile reads them back; a file written without any (as
// before them) holds none; a write that fails before it lands changes
// nothing, one reported failed after it landed is there at the restart.
func TestSlotGens(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idserver.seq")
	f, _, _, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Take(ctx, []Take{{Key: "k", N: 3, Born: true}})
	if gens := reopenGens(t, f); len(gens) != 0 {
		t.Fatalf("a file without slot gens read as %v", gens)
	}
	f, _, _, _ = OpenFile(path)
	if err := f.SetSlotGens(ctx, map[int]int64{1: 5, 100: 7, 16383: 1}); err != nil {
		t.Fatal(err)
	}
	if err := f.SetSlotGens(ctx, map[int]int64{1: 0, 2: 9}); err != nil {
		t.Fatal(err)
	}
	want := map[int]int64{2: 9, 100: 7, 16383: 1}
	if gens := f.SlotGens(); !maps.Equal(gens, want) {
		t.Fatalf("SlotGens %v; want %v", gens, want)
	}
	if err := f.SetSlotGens(ctx, map[int]int64{16384: 1}); err == nil {
		t.Fatal("slot 16384 stored")
	}
	f.fault = func(at faultPoint) error {
		if at == atWrite {
			return errENOSPC
		}
		return nil
	}
	if err := f.SetSlotGens(ctx, map[int]int64{3: 1, 2: 0}); !errors.Is(err, errENOSPC) {
		t.Fatalf("a write failing before it lands: %v", err)
	}
	f.fault = func(at faultPoint) error {
		if at == atWritten {
			return errEIO
		}
		return nil
	}
	if err := f.SetSlotGens(ctx, map[int]int64{4: 2}); !errors.Is(err, errEIO) {
		t.Fatalf("a write failing after it landed: %v", err)
	}
	want[4] = 2
	if gens := reopenGens(t, f); !maps.Equal(gens, want) {
		t.Fatalf("after a restart: %v; want %v", gens, want)
	}
}

// TestFoldKeepsSlotGens: a fold keeps the slot gens, those stored before
// it and those stored while it runs (between its transactions).
func TestFoldKeepsSlotGens(t *testing.T) {
	ctx := context.Background()
	f, _, _, err := OpenFile(filepath.Join(t.TempDir(), "idserver.seq"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SetSlotGens(ctx, map[int]int64{10: 1, 11: 2}); err != nil {
		t.Fatal(err)
	}
	var marks []Mark
	for i := range 5000 {
		marks = append(marks, Mark{Key: fmt.Sprintf("key:%d", i), Value: int64(i), Reserved: int64(i), Born: true})
	}
	f.Take(ctx, []Take{{Key: "key:0", N: 1, Born: true}})
	steps := 0
	f.foldStep = func(stop <-chan struct{}) {
		if steps++; steps == 1 {
			if err := f.SetSlotGens(ctx, map[int]int64{11: 0, 12: 3}); err != nil {
				t.Error(err)
			}
		}
	}
	if err := <-f.Fold(func() []Mark { return marks }); err != nil {
		t.Fatal(err)
	}
	if f.Folds() != 1 || steps == 0 {
		t.Fatalf("%d folds, %d steps", f.Folds(), steps)
	}
	want := map[int]int64{10: 1, 12: 3}
	if gens := reopenGens(t, f); !maps.Equal(gens, want) {
		t.Fatalf("after a fold and a restart: %v; want %v", gens, want)
	}
}

// TestSlotGensSurviveKill: a child process stores slot gens one write
// after another, saying each one that returned, and is killed (SIGKILL)
// at a point chosen by the seed: the file opens, and holds for each slot
// the last generation acknowledged, or one the child wrote after it (its
// output runs ahead of what the test read). Seeded: when the kill comes.
func TestSlotGensSurviveKill(t *testing.T) {
	if path := os.Getenv("SEQ_GENS_CHILD"); path != "" {
		gensChild(path)
		return
	}
	rng := rand.New(rand.NewPCG(testseed.Get(t), 0))
	path := filepath.Join(t.TempDir(), "idserver.seq")
	for run := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSlotGensSurviveKill$")
		cmd.Env = append(os.Environ(), "SEQ_GENS_CHILD="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acked, lines := map[int]int64{}, bufio.NewScanner(out)
		for range 1 + rng.IntN(200) {
			if !lines.Scan() {
				t.Fatalf("run %d: the child ended: %v", run, lines.Err())
			}
			gen, err := strconv.ParseInt(lines.Text(), 10, 64)
			if err != nil {
				t.Fatalf("run %d: the child said %q", run, lines.Text())
			}
			acked[int(gen%gensSlots)] = gen
		}
		cmd.Process.Kill()
		cmd.Wait()
		f, _, _, err := OpenFile(path)
		if err != nil {
			t.Fatalf("run %d: after the kill: %v", run, err)
		}
		gens := f.SlotGens()
		f.Close()
		for slot, gen := range acked {
			// Above what was acknowledged only by writes the child made
			// after (its lines not read yet, or the one being written):
			// each of this slot's.
			if got := gens[slot]; got < gen || got%gensSlots != int64(slot) {
				t.Fatalf("run %d: slot %d holds %d after the kill; %d was acknowledged", run, slot, got, gen)
			}
		}
	}
}

// gensSlots is how many slots gensChild writes, in turn.
const gensSlots = 7

// gensChild stores gens in the file at path, generation after
// generation (each in slot gen % gensSlots, above what the file holds),
// printing each one stored, until it is killed.
func gensChild(path string) {
	f, _, _, err := OpenFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	gen := int64(0)
	for _, g := range f.SlotGens() {
		gen = max(gen, g)
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		gen++
		if err := f.SetSlotGens(context.Background(), map[int]int64{int(gen % gensSlots): gen}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println(gen)
	}
	os.Exit(0)
}
