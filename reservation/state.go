// Package reservation keeps idserver from ever repeating an ID across
// restarts. A Keeper holds a durable reservation T (a time field, ms since
// the epoch): the generator issues no ID whose time field is >= T before a
// larger T is durably stored. T is renewed in the background well before
// it is reached, so requests do not wait for the disk in steady state. At
// start the generator begins at max(now, T), so a restart after borrowing
// ahead, or after the clock was set back while the server was down, still
// continues above every ID issued before.
//
// A FileStore keeps T in a state file that one process at a time may use:
// it holds an exclusive lock on a lock file beside it, which also keeps a
// copy of T, so that a deleted state file loses nothing. A DirLock, on
// the same lock files, is a server's hold on its whole directory, in
// every mode.
package reservation

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"

	"github.com/idserver/idserver/idgen"
)

// State is what the state file holds: the reservation, and the identity
// of the generator it belongs to, so a file is never used by another.
type State struct {
	ServerID int64        // the generator's server-id
	Layout   idgen.Layout // and its layout
	Epoch    int64        // unix ms
	Reserved int64        // T: no ID has a time field >= T (ms since Epoch)
}

// version is the state file format; a file of another version is refused.
const version = "idserver-state v1"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by every error Unmarshal returns.
var ErrCorrupt = errors.New("not a valid idserver state file")

// Marshal returns the file form of s: a few readable lines, the last a
// CRC-32C of the others.
func (s State) Marshal() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\nserver-id %d\nlayout %d %d %d\nepoch %d\nreserved %d\n",
		version, s.ServerID, s.Layout.IDBits, s.Layout.ShardBits, s.Layout.RandomBits, s.Epoch, s.Reserved)
	fmt.Fprintf(&b, "crc32c %08x\n", crc32.Checksum(b.Bytes(), castagnoli))
	return b.Bytes()
}

// Unmarshal parses the file form written by Marshal. Anything else, an
// empty or truncated file among them, is an error wrapping ErrCorrupt.
func Unmarshal(data []byte) (State, error) {
	corrupt := func(why string) (State, error) { return State{}, fmt.Errorf("%w: %s", ErrCorrupt, why) }
	if len(data) == 0 {
		return corrupt("the file is empty")
	}
	body, sum, ok := bytes.Cut(data, []byte("crc32c "))
	if !ok || !bytes.HasSuffix(sum, []byte("\n")) {
		return corrupt("no checksum line (truncated?)")
	}
	want, err := strconv.ParseUint(string(bytes.TrimSuffix(sum, []byte("\n"))), 16, 32)
	if err != nil {
		return corrupt("malformed checksum line")
	}
	if got := crc32.Checksum(body, castagnoli); uint32(want) != got {
		return corrupt(fmt.Sprintf("checksum %08x does not match the contents (%08x)", want, got))
	}
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if lines[0] != version {
		return corrupt(fmt.Sprintf("first line %q, want %q", lines[0], version))
	}
	var s State
	fields := []struct {
		name string
		dst  []*int64
	}{
		{"server-id", []*int64{&s.ServerID}},
		{"layout", nil},
		{"epoch", []*int64{&s.Epoch}},
		{"reserved", []*int64{&s.Reserved}},
	}
	var layout [3]int64
	fields[1].dst = []*int64{&layout[0], &layout[1], &layout[2]}
	if len(lines) != 1+len(fields) {
		return corrupt(fmt.Sprintf("%d lines, want %d", len(lines), 1+len(fields)))
	}
	for i, f := range fields {
		words := strings.Fields(lines[i+1])
		if len(words) != 1+len(f.dst) || words[0] != f.name {
			return corrupt(fmt.Sprintf("line %d is %q, want %s and %d numbers", i+2, lines[i+1], f.name, len(f.dst)))
		}
		for j, d := range f.dst {
			n, err := strconv.ParseInt(words[j+1], 10, 64)
			if err != nil {
				return corrupt(fmt.Sprintf("line %d: %q is not a number", i+2, words[j+1]))
			}
			*d = n
		}
	}
	s.Layout = idgen.Layout{IDBits: int(layout[0]), ShardBits: int(layout[1]), RandomBits: int(layout[2])}
	return s, nil
}

// Check reports whether s was written by a generator with want's identity:
// same server-id, layout and epoch. Reusing another's reservation could
// repeat its IDs or waste the time field.
func (s State) Check(want State) error {
	if s.ServerID != want.ServerID || s.Layout != want.Layout || s.Epoch != want.Epoch {
		return fmt.Errorf("state file was written for server-id %d, id-range %d shard-range %d random-range %d, epoch %d; "+
			"this server has server-id %d, id-range %d shard-range %d random-range %d, epoch %d",
			s.ServerID, s.Layout.IDBits, s.Layout.ShardBits, s.Layout.RandomBits, s.Epoch,
			want.ServerID, want.Layout.IDBits, want.Layout.ShardBits, want.Layout.RandomBits, want.Epoch)
	}
	return nil
}
