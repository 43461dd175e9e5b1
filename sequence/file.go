package sequence

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	bolt "go.etcd.io/bbolt"
)

// File keeps the reservations of a single server's sequences in a bbolt
// database in dir (bbolt is the embedded store etcd itself uses). It is a
// Backend, and a Folder.
//
// Writes are appended to a log bucket, one entry per write holding every
// key it reserves, and whether the key exists (a key prepared for a
// pipeline does not, until a value of it is handed out: a restart
// forgets it): a write of thousands of keys then costs one entry and
// bbolt's two fsyncs, where putting each key in place would rewrite a
// page per key (measured here: 52 ms to put 800 random keys among
// 100,000, against 2 ms to append them). When the log outgrows what the
// keys hold, the Table folds it: it hands the File every key's mark, the
// File writes them in order in place of the marks bucket and empties the
// log. A restart reads the marks and then the log: the last write of a
// key wins.
//
// The file is created by the first write, not at start: a start that
// fails writes nothing. Its owner holds the state file's lock, and bbolt
// locks the file too.
type File struct {
	path string
	// A log is folded when it holds more than foldMin bytes and
	// foldPerKey bytes a key (tests lower them; see FoldDue).
	foldMin, foldPerKey int

	mu       sync.Mutex
	gens     map[int]int64 // what the slot gens bucket holds (SlotGens)
	db       *bolt.DB      // nil until the first write
	entry    uint64        // the number of the last log entry
	logBytes int           // what was appended to the log since the last fold
	rec      []byte        // the buffer of the next write's records
	dirty    bool          // a write since the start: the last run did not end cleanly
	folds    uint64
	// folding is the fold under way, nil if none: see Fold.
	folding *folding
	// foldStep, if set (tests), runs before each transaction of a fold's
	// marks, given the channel that stops the fold.
	foldStep func(stop <-chan struct{})
	// dirUnsynced: the file's name in its directory may not be durable
	// (the file was opened, perhaps created, or a fold renamed a new one
	// over it and the directory's sync failed): the next write syncs the
	// directory first, and fails if it cannot. Otherwise a power loss
	// could take away the file, or bring back the one before a fold,
	// with writes reported durable.
	dirUnsynced bool
	// slotSeen is what the slot seen bucket holds (SlotSeen), by slot.
	slotSeen map[int][]byte
	// slotTakes is what the slot takes bucket holds (SlotTakes), by slot.
	slotTakes map[int][]byte
	// fault, if set (tests), is asked at each point where the file
	// writes: an error fails the write there, as a disk would; it may
	// block, as a disk that stalls.
	fault func(at faultPoint) error
}

// faultPoint is a point where a File writes, for tests that fail writes
// (File.fault).
type faultPoint int

const (
	atWrite   faultPoint = iota // before a write's transaction: nothing lands
	atWritten                   // after it: it landed, but is reported failed
	atDirSync                   // before the directory is synced
	atFoldTx                    // before each transaction of a fold's new file
	atRename                    // before the fold's file is renamed over the old one
)

// inject is the fault the test asks for at at, if any.
func (f *File) inject(at faultPoint) error {
	if f.fault == nil {
		return nil
	}
	return f.fault(at)
}

// folding is a fold under way: stop asks it to give up, done is closed
// once it has ended.
type folding struct {
	stop, done chan struct{}
}

// FileMultiple bounds the file's size against its live data (each key's
// bytes and its 16-byte mark) when the same keys are written again and
// again, for keys of 256 bytes or more (seq-max-key-bytes' default is
// 512); with shorter keys the log folded at foldPerKey bytes a key
// (8 MiB at least) weighs more. A graceful stop adds about 22 bytes a
// key (Release).
const FileMultiple = 2

// FileBound is the most disk the file takes with keys keys of up to
// keyBytes bytes each (seq-max-keys, seq-max-key-bytes), for keys of 256
// bytes or more (see FileMultiple): FileMultiple times their live data,
// a fold's new copy of it beside the old file (path.fold) while the fold
// runs, and a graceful stop's records. Volumes are sized from it
// (docs/sequences.md, deploy/kubernetes).
func FileBound(keys, keyBytes int) int64 {
	live := int64(keys) * int64(keyBytes+markBytes)
	return (FileMultiple+1)*live + int64(keys)*stopRecordMax
}

// markBytes is what a key's mark adds to its bytes in the live data.
const markBytes = 16

// Restart tells what the file said at the start.
type Restart struct {
	Keys int // the keys it holds
	// Clean is whether the last run ended with a graceful stop (Release):
	// then every key continues from its last value, with what it had
	// reserved in hand (Mark.Reserved), once MarkDirty succeeded: a run
	// that hands any of it out must leave a file that says so.
	Clean bool
	// Skipped bounds the values a restart after a crash skips: what the
	// last run had reserved and may not have handed out, summed over the
	// keys. 0 after a clean stop.
	Skipped int64
}

var (
	metaBucket  = []byte("idserver")
	marksBucket = []byte("marks")
	logBucket   = []byte("log2")
	formatKey   = []byte("format")
	cleanKey    = []byte("clean")
	// stopKey holds the number of the first log entry of the last
	// graceful stop: only its records are exact (see Release).
	stopKey = []byte("stop")
	// slotGensBucket holds, per hash slot (2 bytes, big-endian), the
	// generation at which the file holds the slot's keys (8 bytes).
	slotGensBucket = []byte("slotgens")
	// oldLogBucket is format 1's log, whose records have no born flag:
	// each key in it exists. A file of format 1 is read as it is, and
	// its old log goes at the first fold.
	oldLogBucket = []byte("log")
)

// format identifies the file as idserver's sequences, and the version of
// its layout: 2 since records say whether their key exists. A server
// that knows only format 1 refuses a file of format 2 rather than miss
// its log.
const (
	format  = "idserver sequences 3"
	format2 = "idserver sequences 2"
	format1 = "idserver sequences 1"
)

// OpenFile reads the sequences stored at path: none if it does not
// exist. A file that is not idserver's sequences, or is corrupt, is an
// error, and is left as it is. It reads the file a page at a time, each
// key's bytes copied once, into the marks it returns.
func OpenFile(path string) (*File, []Mark, Restart, error) {
	f := &File{path: path, foldMin: 8 << 20, foldPerKey: 8 * 40}
	file, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return f, nil, Restart{Clean: true}, nil
	}
	if err != nil {
		return nil, nil, Restart{}, fmt.Errorf("sequence file %s: %w", path, err)
	}
	defer file.Close()
	marks, r, err := f.load(file)
	if err != nil {
		return nil, nil, Restart{}, fmt.Errorf("sequence file %s: %w (the file is left as it is)", path, err)
	}
	return f, marks, r, nil
}

// record is what the file holds of a key: its mark, its last value
// handed out when the mark was written, whether it exists (born), and
// whether that last value is exact: written by a graceful stop, which
// keeps each key's reservation, so that a clean restart resumes the key
// with the values it had in hand (see Restart.Clean).
type record struct {
	mark, issued int64
	born, exact  bool
}

// load reads every key's mark: the marks bucket, then the log in order.
// The marks come in key order, each key once; a record of the log finds
// its key among them by keyed's index.
func (f *File) load(file *os.File) (marks []Mark, r Restart, err error) {
	info, err := file.Stat()
	if err != nil {
		return nil, Restart{}, err
	}
	w, err := checkPages(file, info.Size())
	if err != nil {
		return nil, Restart{}, err
	}
	v, stopFrom := "", uint64(0)
	err = w.bucket(metaBucket, false, func(k, val []byte) error {
		switch string(k) {
		case string(formatKey):
			v = string(val)
		case string(cleanKey):
			r.Clean = true
		case string(stopKey):
			if len(val) == 8 {
				stopFrom = binary.BigEndian.Uint64(val)
			}
		}
		return nil
	})
	if err != nil {
		return nil, Restart{}, err
	}
	if v != format && v != format2 && v != format1 {
		return nil, Restart{}, errors.New("not a sequences file of idserver (no format key " + format + ")")
	}
	if err := loadSlots(w, slotSeenBucket, &f.slotSeen); err != nil {
		return nil, Restart{}, err
	}
	if err := loadSlots(w, slotTakesBucket, &f.slotTakes); err != nil {
		return nil, Restart{}, err
	}
	var ks keyed
	err = w.bucket(marksBucket, true, func(k, v []byte) error {
		if len(v) != 16 {
			return fmt.Errorf("the mark of %q is %d bytes, not 16", clip(string(k)), len(v))
		}
		if n := len(ks.marks); n > 0 && ks.marks[n-1].Key >= string(k) {
			return errors.New("the marks are out of order")
		}
		ks.add(Mark{Key: string(k), Value: int64(binary.BigEndian.Uint64(v)), Born: true}, keyHash(k), int64(binary.BigEndian.Uint64(v[8:])), false)
		return nil
	})
	if err != nil {
		return nil, Restart{}, err
	}
	err = w.bucket(oldLogBucket, false, func(k, v []byte) error { f.logBytes += len(v); return ks.decodeEntry(v, false, false) })
	if err == nil && v != format1 {
		err = w.bucket(logBucket, true, func(k, v []byte) error {
			if len(k) != 8 && len(k) != 12 { // an entry's number, and its piece's
				return errors.New("a log entry's key is not 8 or 12 bytes")
			}
			f.entry = binary.BigEndian.Uint64(k)
			f.logBytes += len(v)
			return ks.decodeEntry(v, true, stopFrom != 0 && f.entry >= stopFrom)
		})
	}
	if err == nil {
		f.gens, err = loadGens(w)
	}
	if err != nil {
		return nil, Restart{}, err
	}
	marks = ks.marks[:0]
	for i, m := range ks.marks {
		if !m.Born {
			continue // only prepared: no value of it was handed out
		}
		m.Reserved = m.Value
		switch {
		case r.Clean && ks.exact[i]:
			m.Value = ks.issued[i] // resumed with what it had in hand
		case !r.Clean:
			r.Skipped += m.Value - ks.issued[i]
		}
		marks = append(marks, m)
	}
	clear(ks.marks[len(marks):])
	ks.slots = nil
	r.Keys = len(marks)
	return marks, r, nil
}

// keyed is the marks of a load: the marks bucket's (in key order), then
// the keys the log adds; issued is each one's last value handed out when
// its mark was written, and exact whether the last graceful stop wrote it.
//
// A record of the log finds its key by slots, an open-addressing index of
// the marks kept at most half full (16 to 32 bytes a key): each slot 32
// bits of the key's hash (keyHash), which place it, and the mark's index
// + 1 (0: empty). A binary search of the marks, and a map of the keys the
// log added, took 2.3 s of a restart at the bounds (a million keys of 512
// bytes, their records in the log out of order); a map of every key was
// a third as much again as the marks. The next mark after the last found
// is tried first: records often come in the marks' order.
type keyed struct {
	marks  []Mark
	issued []int64
	exact  []bool
	slots  []uint64
	last   int
}

// keyHash is a key's hash in a stop's records and in keyed's index: it
// must stay the same from one run to the next (xxHash64).
func keyHash(key []byte) uint64 { return xxhash.Sum64(key) }

// keyHashString is keyHash of a key held as a string.
func keyHashString(key string) uint64 { return xxhash.Sum64String(key) }

// add appends m's mark, of a key not among the marks yet, hashed h.
func (ks *keyed) add(m Mark, h uint64, issued int64, exact bool) {
	if 2*(len(ks.marks)+1) > len(ks.slots) {
		ks.grow()
	}
	ks.marks = append(ks.marks, m)
	ks.issued = append(ks.issued, issued)
	ks.exact = append(ks.exact, exact)
	ks.place(h>>32<<32 | uint64(len(ks.marks)))
}

// grow doubles the index.
func (ks *keyed) grow() {
	old := ks.slots
	ks.slots = make([]uint64, max(1024, 2*len(old)))
	for _, slot := range old {
		if slot != 0 {
			ks.place(slot)
		}
	}
}

// place puts slot in the index.
func (ks *keyed) place(slot uint64) {
	mask := uint64(len(ks.slots) - 1)
	for at := slot >> 32 & mask; ; at = (at + 1) & mask {
		if ks.slots[at] == 0 {
			ks.slots[at] = slot
			return
		}
	}
}

// probe calls match with the index of each mark whose hash may be h,
// until it returns true.
func (ks *keyed) probe(h uint64, match func(i int) bool) {
	mask := uint64(len(ks.slots) - 1)
	for at := h >> 32 & mask; len(ks.slots) > 0; at = (at + 1) & mask {
		slot := ks.slots[at]
		if slot == 0 {
			return
		}
		if slot>>32 == h>>32 && match(int(uint32(slot))-1) {
			return
		}
	}
}

// at is the index of key's mark, -1 if it has none; h is key's hash.
func (ks *keyed) at(key []byte, h uint64) int {
	if i := ks.last + 1; i < len(ks.marks) && ks.marks[i].Key == string(key) {
		ks.last = i
		return i
	}
	found := -1
	ks.probe(h, func(i int) bool {
		if ks.marks[i].Key != string(key) {
			return false
		}
		found, ks.last = i, i
		return true
	})
	return found
}

// hashed is the index of the one mark whose key hashes to h (a stop's
// record names its key so), -1 if none does, or more than one.
func (ks *keyed) hashed(h uint64) int {
	found := -1
	ks.probe(h, func(i int) bool {
		if keyHashString(ks.marks[i].Key) != h {
			return false
		}
		if found >= 0 {
			found = -1 // two keys of one hash: neither is named
			return true
		}
		found = i
		return false
	})
	return found
}

// set makes s key's record; a key once born stays born.
func (ks *keyed) set(key []byte, s record) {
	h := keyHash(key)
	i := ks.at(key, h)
	if i < 0 {
		ks.add(Mark{Key: string(key)}, h, 0, false)
		i = len(ks.marks) - 1
	}
	ks.setAt(i, s)
}

// setAt makes s the record of the i-th mark.
func (ks *keyed) setAt(i int, s record) {
	m := &ks.marks[i]
	m.Value, m.Born, ks.issued[i], ks.exact[i] = s.mark, s.born || m.Born, s.issued, s.exact
}

// each calls fn for every pair of b; a missing bucket is an error.
func each(b *bolt.Bucket, fn func(k, v []byte) error) error {
	if b == nil {
		return errors.New("a bucket is missing")
	}
	return b.ForEach(fn)
}

// A log entry is a list of records, each a key's length and bytes, its
// mark and its last value then, as uvarints, and a byte of flags: 1 if
// the key exists, 2 if its last value is exact, 4 if the key's bytes are
// its keyHash, big-endian (format 1's log has no such byte: every key in
// it exists).
func appendRecord(b []byte, key string, s record) []byte {
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	return appendFields(b, s, 0)
}

// appendStopRecord appends a graceful stop's record of the key whose
// keyHash is h: the stop writes 8 bytes of each key, not its name (a
// million keys of 512 bytes were half a gigabyte of writes, 3.6 s of the
// stop).
func appendStopRecord(b []byte, h uint64, s record) []byte {
	b = binary.AppendUvarint(b, 8)
	b = binary.BigEndian.AppendUint64(b, h)
	return appendFields(b, s, recordHashed)
}

// appendFields appends s's mark, last value and flags.
func appendFields(b []byte, s record, flags byte) []byte {
	b = binary.AppendUvarint(b, uint64(s.mark))
	b = binary.AppendUvarint(b, uint64(s.issued))
	if s.born {
		flags |= recordBorn
	}
	if s.exact {
		flags |= recordExact
	}
	return append(b, flags)
}

// A record's flags.
const (
	recordBorn   = 1 << iota // the key exists
	recordExact              // its last value is exact: a graceful stop wrote it
	recordHashed             // the key is named by its hash: a graceful stop wrote it
)

// decodeEntry reads the records of a log entry into ks; flagged says
// whether each ends with its flags (format 2 on), stop whether the entry
// is of the last graceful stop: only then is a last value exact (an
// earlier stop's is not: the run after it may have handed out the values
// it had in hand without writing). A record named by a hash that no key,
// or more than one, has is passed over: the key continues above its mark.
func (ks *keyed) decodeEntry(b []byte, flagged, stop bool) error {
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return errors.New("a log entry is cut short")
		}
		key := b[k : k+int(n)]
		b = b[k+int(n):]
		var s record
		for _, field := range []*int64{&s.mark, &s.issued} {
			v, k := binary.Uvarint(b)
			if k <= 0 || v > math.MaxInt64 {
				return errors.New("a log entry is cut short")
			}
			*field, b = int64(v), b[k:]
		}
		s.born = true
		var flags byte
		if flagged {
			if len(b) == 0 || b[0] > recordBorn|recordExact|recordHashed {
				return errors.New("a log entry is cut short")
			}
			flags, b = b[0], b[1:]
			s.born, s.exact = flags&recordBorn != 0, flags&recordExact != 0 && stop
		}
		switch {
		case flags&recordHashed == 0:
			ks.set(key, s)
		case len(key) != 8:
			return errors.New("a stop's record does not name its key by 8 bytes")
		default:
			if i := ks.hashed(binary.BigEndian.Uint64(key)); i >= 0 {
				ks.setAt(i, s)
			}
		}
	}
	return nil
}

// Take reserves each segment, all in one write.
func (f *File) Take(ctx context.Context, ts []Take) {
	n := 0
	for i := range ts {
		t := &ts[i]
		if t.After > math.MaxInt64-t.N {
			t.Err = ErrOverflow
			continue
		}
		t.First, t.Last = t.After+1, t.After+t.N
		n++
	}
	if n == 0 {
		return
	}
	f.Keep(ts)
}

// Keep records the segment each t of ts without an Err was given, all in
// one write, or sets its Err.
func (f *File) Keep(ts []Take) {
	if !slices.ContainsFunc(ts, func(t Take) bool { return t.Err == nil }) {
		return
	}
	err := f.write(dirty, func(rec []byte) []byte {
		for _, t := range ts {
			if t.Err == nil {
				rec = appendRecord(rec, t.Key, record{t.Last, t.Issued, t.Born, false})
			}
		}
		return rec
	})
	if err != nil {
		for i := range ts {
			if ts[i].Err == nil {
				ts[i].Err = err
			}
		}
	}
}

// Set stores each value of ss as its key's mark, all in one write; the
// Table checked that each goes up. If the write fails, each s gets its
// error.
func (f *File) Set(ctx context.Context, ss []Setting) {
	if !slices.ContainsFunc(ss, func(s Setting) bool { return s.Err == nil }) {
		return
	}
	err := f.write(dirty, func(rec []byte) []byte {
		for _, s := range ss {
			if s.Err == nil {
				rec = appendRecord(rec, s.Key, record{s.Value, s.Value, true, false})
			}
		}
		return rec
	})
	if err != nil {
		for i := range ss {
			if ss[i].Err == nil {
				ss[i].Err = err
			}
		}
	}
}

// Release stores the marks of a graceful stop, and that it was one: in
// writes of maxWrite bytes of records at most, the first saying where the
// stop's records begin, the last that the stop was graceful (a crash
// between leaves marks that are right, and a file that says it was not).
// Each key keeps its reservation (Reserved), with its last value handed
// out written as exact: a clean restart resumes it with the values it had
// in hand, skipping none and writing nothing, once MarkDirty has said
// that a run is on again. Only the last stop's records are exact: a key
// that handed out all it had in hand after a clean restart is not among
// the next stop's, and its record of the stop before must not bring back
// the values it handed out (they came back twice: 4..10 again after two
// graceful restarts). Each key is named by its keyHash.
func (f *File) Release(ctx context.Context, marks []Mark) error {
	f.stopFold()
	end := begins
	for len(marks) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(len(marks), maxWrite/stopRecordMax)
		if n == len(marks) {
			end |= clean
		}
		err := f.write(end, func(rec []byte) []byte {
			for _, m := range marks[:n] {
				rec = appendStopRecord(rec, keyHashString(m.Key), record{max(m.Reserved, m.Value), m.Value, m.Born, true})
			}
			return rec
		})
		if err != nil {
			return err
		}
		marks, end = marks[n:], dirty
	}
	return nil
}

// stopRecordMax is the most bytes a stop's record takes: the hash and its
// length, two uvarints and the flags.
const stopRecordMax = 1 + 8 + 2*binary.MaxVarintLen64 + 1

// maxWrite bounds the bytes of keys one write of the log carries (but
// for one longer key): the writer's takes and Release are cut into
// writes of maxWrite bytes, so that what a write holds in memory (its
// record, and bbolt's copy) stays small whatever the keys.
const maxWrite = 4 << 20

// writeLen is how many of xs, from the first, one write carries: at
// least one, and no more than maxWrite bytes of keys.
func writeLen[X any](xs []X, key func(X) string) int {
	n, size := 0, 0
	for n < len(xs) && (n == 0 || size+len(key(xs[n])) <= maxWrite) {
		size += len(key(xs[n]))
		n++
	}
	return n
}

// How a write leaves the file: a graceful stop's last write is clean,
// every other write says the run is on; a stop's first write begins it.
type ending uint8

const (
	dirty  ending = 0
	clean  ending = 1
	begins ending = 2
)

// keepRec is the largest record buffer a File keeps for its next write:
// a write of maxWrite bytes of keys, and their marks.
const keepRec = maxWrite + maxWrite/2

// write appends to the log, in one transaction fsynced before it
// returns, the records that records appends to the buffer it is given:
// the File's own, reused, so that a write of thousands of keys leaves
// the collector neither its record nor the copies that grew it.
func (f *File) write(end ending, records func([]byte) []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.open(); err != nil {
		return err
	}
	rec := records(f.rec[:0])
	if cap(rec) <= keepRec {
		f.rec = rec
	}
	err := f.update(func(tx *bolt.Tx) error {
		if err := f.mark(tx, end); err != nil {
			return err
		}
		return putEntry(tx, f.entry+1, rec)
	})
	if err != nil {
		return err
	}
	f.entry++
	f.logBytes += len(rec)
	if err := f.inject(atWritten); err != nil {
		return fmt.Errorf("sequence file %s: %w", f.path, err)
	}
	return nil
}

// update runs one transaction that writes the file, durably before it
// returns nil: the directory is synced first if it may need it. A failed
// one leaves f as it was. f.mu is held.
func (f *File) update(fn func(tx *bolt.Tx) error) error {
	wasDirty := f.dirty
	err := f.syncedDir()
	if err == nil {
		err = f.inject(atWrite)
	}
	if err == nil {
		err = f.db.Update(fn)
		unmapResident(f.db)
	}
	if err != nil {
		f.dirty = wasDirty // not recorded: the next write tries again (mark)
		return fmt.Errorf("sequence file %s: %w", f.path, err)
	}
	return nil
}

// syncedDir syncs the file's directory if its name may not be durable
// (dirUnsynced). f.mu is held.
func (f *File) syncedDir() error {
	if !f.dirUnsynced {
		return nil
	}
	err := f.inject(atDirSync)
	if err == nil {
		err = syncDir(filepath.Dir(f.path))
	}
	if err != nil {
		return err
	}
	f.dirUnsynced = false
	return nil
}

// putEntry puts rec in tx as the log's entry number entry (a write's is
// the next, f.entry+1, counted once tx commits), in pieces of whole records, of piece
// bytes unless a record is longer, keyed by the entry's number and the
// piece's. bbolt rewrites the last leaf of the log at each append, with
// every value on it (two at least): an entry of megabytes was written
// again by the next write, and read through the mapping.
func putEntry(tx *bolt.Tx, entry uint64, rec []byte) error {
	b := tx.Bucket(logBucket)
	b.FillPercent = 1                              // appended in order
	keys := make([]byte, 0, 12*(len(rec)/piece+2)) // bbolt keeps them until the commit
	for i := uint32(0); len(rec) > 0; i++ {
		n := 0
		for n < len(rec) && (n == 0 || n+recordLen(rec[n:]) <= piece) {
			n += recordLen(rec[n:])
		}
		if len(keys)+12 > cap(keys) {
			keys = make([]byte, 0, 12*(len(rec)/piece+2))
		}
		at := len(keys)
		keys = binary.BigEndian.AppendUint64(keys, entry)
		keys = binary.BigEndian.AppendUint32(keys, i)
		if err := b.Put(keys[at:], rec[:n]); err != nil {
			return err
		}
		rec = rec[n:]
	}
	return nil
}

// piece is the most bytes of records a value of the log holds, but for
// one longer record.
const piece = 1024

// recordLen is the length of the record rec begins with (appendRecord's).
func recordLen(rec []byte) int {
	n, k := binary.Uvarint(rec)
	at := k + int(n)
	for range 2 {
		_, k := binary.Uvarint(rec[at:])
		at += k
	}
	return at + 1
}

// FoldDue reports whether the log has outgrown what keys keys hold (a
// key's mark, or foldMin), and no fold is under way.
func (f *File) FoldDue(keys int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.folding == nil && f.logBytes > max(f.foldMin, f.foldPerKey*keys)
}

// Fold writes the marks that snapshot returns in place of everything
// stored, and sends the result on the channel it returns. snapshot runs
// now, under the File's lock, so no write comes between it and the fold:
// each of its marks must be at least everything written for its key
// before. The rest runs on a goroutine of its own while writes go on into
// the log: the marks go, in key order (bbolt writes each page once), into
// a new file beside the old one; the log entries written meanwhile are
// copied after them, the last ones under the lock; then the new file is
// renamed over the old one, as bbolt's own compact does. At a million
// keys of 512 bytes a fold takes 4 s, during which the writer, when it
// folded, stopped: right after a kill -9, when every key needs a write
// before its next value, some waited past their 5 s for -BUSY.
//
// Rewritten in place, the file doubled: the pages of the old marks are
// free only once the transaction that writes the new ones ends, so the
// new ones went at the end, and the file kept both (1.1 to 2.1 GB at a
// million keys of 512 bytes). The new file is written in transactions of
// foldTx bytes, unsynced (until its rename no one reads it) and synced
// once, so that neither bbolt's pages of a whole fold nor one buffer of
// every key is held at once. Release and Close stop a fold under way.
func (f *File) Fold(snapshot func() []Mark) <-chan error {
	result := make(chan error, 1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.open(); err != nil {
		result <- err
		return result
	}
	if f.folding != nil {
		result <- errors.New("a fold is under way")
		return result
	}
	marks, from := snapshot(), f.entry
	fl := &folding{stop: make(chan struct{}), done: make(chan struct{})}
	f.folding = fl
	go func() {
		defer close(fl.done)
		err := f.fold(fl, marks, from)
		if err != nil {
			err = fmt.Errorf("sequence file %s: folding the log: %w", f.path, err)
		}
		result <- err
	}()
	return result
}

// errFoldStopped ends a fold that Release or Close stopped.
var errFoldStopped = errors.New("stopped")

// fold writes marks into a new file, then the log entries after from,
// and puts the file in place of f's.
func (f *File) fold(fl *folding, marks []Mark, from uint64) error {
	slices.SortFunc(marks, func(a, b Mark) int { return strings.Compare(a.Key, b.Key) })
	db, err := f.rewrite(fl, marks, from)
	after, carried, more := afterEntry(from), 0, 0
	if err == nil {
		// What came meanwhile, unlocked, but for the last of it.
		after, carried, err = f.carry(db, after, 1<<30)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.folding = nil
	if err == nil {
		_, more, err = f.carry(db, after, math.MaxInt)
		carried += more
	}

	if err == nil {
		err = f.replace(db)
	}
	if err != nil && f.db != db {
		if db != nil {
			db.Close()
			os.Remove(db.Path())
		}
		return err
	}
	f.logBytes = carried // what came during the fold is not folded yet
	f.folds++
	return err // the directory's sync, which the next write tries again
}

// carry copies into db the pieces of f's log entries after the piece
// after, and the clean flag as it is, in transactions of foldTx bytes,
// until it has copied all, or most bytes; it returns the last piece
// copied, and the bytes copied.
func (f *File) carry(db *bolt.DB, after []byte, most int) (last []byte, bytes int, err error) {
	last = after
	for {
		var copied int
		err = f.db.View(func(old *bolt.Tx) error {
			return db.Update(func(tx *bolt.Tx) error {
				if err := copyClean(old, tx); err != nil {
					return err
				}
				if err := copyGens(old, tx); err != nil {
					return err
				}
				dst := tx.Bucket(logBucket)
				dst.FillPercent = 1
				c := old.Bucket(logBucket).Cursor()
				k, v := c.Seek(last)
				if string(k) == string(last) {
					k, v = c.Next()
				}
				for ; k != nil && copied < foldTx; k, v = c.Next() {
					if err := dst.Put(k, v); err != nil {
						return err
					}
					copied += len(v)
					last = append(last[:0:0], k...) // a piece, not the entry: a transaction may end inside one
				}
				return nil
			})
		})
		bytes += copied
		if err != nil || copied < foldTx || bytes >= most {
			return last, bytes, err
		}
	}
}

// afterEntry is a key past every piece of entry n of the log, and before
// those of n+1.
func afterEntry(n uint64) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, n), math.MaxUint32)
}

// copyGens makes tx's slots' buckets (the slot gens, what was seen of
// the slots' records, and the takes begun) old's.
func copyGens(old, tx *bolt.Tx) error {
	for _, name := range [][]byte{slotGensBucket, slotSeenBucket, slotTakesBucket} {
		if err := tx.DeleteBucket(name); err != nil && !errors.Is(err, bolt.ErrBucketNotFound) {
			return err
		}
		from := old.Bucket(name)
		if from == nil {
			continue
		}
		to, err := tx.CreateBucket(name)
		if err != nil {
			return err
		}
		if err := from.ForEach(func(k, v []byte) error { return to.Put(k, v) }); err != nil {
			return err
		}
	}
	return nil
}

// copyClean sets tx's clean flag as old has it.
func copyClean(old, tx *bolt.Tx) error {
	meta := tx.Bucket(metaBucket)
	if old.Bucket(metaBucket).Get(cleanKey) != nil {
		return meta.Put(cleanKey, []byte{1})
	}
	return meta.Delete(cleanKey)
}

// replace syncs db and renames it over f's file, whose place it takes,
// then syncs the directory. Once renamed, db is f's file whatever comes
// after: the writes that follow go to the file the name gives (they went
// to the old one, unlinked, and a restart lost them), and if the
// directory's sync failed, each is refused until it succeeds (syncedDir).
// f.mu is held.
func (f *File) replace(db *bolt.DB) error {
	err := db.Sync()
	if err == nil {
		err = f.inject(atRename)
	}
	if err == nil {
		err = os.Rename(db.Path(), f.path)
	}
	if err != nil {
		return err
	}
	db.NoSync = false
	f.db.Close()
	f.db = db
	unmapResident(db)
	f.dirUnsynced = true
	return f.syncedDir()
}

// stopFold stops a fold under way and waits for its end. f.mu is not
// held: the fold's end takes it.
func (f *File) stopFold() {
	f.mu.Lock()
	fl := f.folding
	f.mu.Unlock()
	if fl != nil {
		close(fl.stop)
		<-fl.done
	}
}

// foldTx is the most key and mark bytes a transaction of a fold puts.
const foldTx = 8 << 20

// rewrite writes marks, sorted, and the meta bucket into a new file
// beside f's, and returns it open; the keys bbolt cannot hold as keys go
// in its log, as entry from (the entries after from follow it). It gives
// up when fl is stopped.
func (f *File) rewrite(fl *folding, marks []Mark, from uint64) (db *bolt.DB, err error) {
	tmp := f.path + ".fold"
	os.Remove(tmp) // a fold a crash cut short
	db, err = bolt.Open(tmp, 0o600, boltOptions)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			db.Close()
			os.Remove(tmp)
			db = nil
		}
	}()
	db.NoSync = true
	var rest []byte // the keys bbolt cannot hold as keys (empty, or too long) stay in the log
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket(metaBucket)
		if err == nil {
			err = meta.Put(formatKey, []byte(format))
		}
		for _, b := range [][]byte{marksBucket, logBucket} {
			if err == nil {
				_, err = tx.CreateBucket(b)
			}
		}
		return err
	})
	// bbolt keeps what Put is given until the commit: a transaction's
	// keys and values are in one buffer, never grown (which would move
	// it), reused by the next.
	var buf []byte
	for len(marks) > 0 && err == nil {
		if f.foldStep != nil {
			f.foldStep(fl.stop)
		}
		select {
		case <-fl.stop:
			return db, errFoldStopped
		default:
		}
		if err = f.inject(atFoldTx); err != nil {
			return db, err
		}
		n, size := 0, 0
		for n < len(marks) && (n == 0 || size+len(marks[n].Key)+16 <= foldTx) {
			size += len(marks[n].Key) + 16
			n++
		}
		if cap(buf) < size {
			buf = make([]byte, 0, size)
		}
		buf = buf[:0]
		err = db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(marksBucket)
			b.FillPercent = 1 // keys come in order: pages filled up are never split again
			for _, m := range marks[:n] {
				if len(m.Key) == 0 || len(m.Key) > bolt.MaxKeySize {
					rest = appendRecord(rest, m.Key, record{m.Reserved, m.Value, true, false})
					continue
				}
				at := len(buf)
				buf = append(buf, m.Key...)
				buf = binary.BigEndian.AppendUint64(buf, uint64(m.Reserved))
				buf = binary.BigEndian.AppendUint64(buf, uint64(m.Value))
				if err := b.Put(buf[at:at+len(m.Key)], buf[at+len(m.Key):]); err != nil {
					return err
				}
			}
			return nil
		})
		marks = marks[n:]
	}
	if err == nil && len(rest) > 0 {
		err = db.Update(func(tx *bolt.Tx) error {
			return putEntry(tx, from, rest)
		})
	}
	return db, err
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// mark records in tx whether the run ended cleanly, when that changes.
func (f *File) mark(tx *bolt.Tx, end ending) error {
	meta := tx.Bucket(metaBucket)
	if end&begins != 0 {
		if err := meta.Put(formatKey, []byte(format)); err != nil {
			return err
		}
		if err := meta.Put(stopKey, binary.BigEndian.AppendUint64(nil, f.entry+1)); err != nil {
			return err
		}
	}
	switch {
	case end&clean != 0:
		f.dirty = false
		return meta.Put(cleanKey, []byte{1})
	case !f.dirty:
		f.dirty = true
		return meta.Delete(cleanKey)
	}
	return nil
}

// boltOptions open the file for writing. The freelist is written at
// every commit (a page or two: a fold leaves a new file without free
// pages), so that an open reads it rather than every page of the file to
// rebuild it (bbolt's NoFreelistSync, as etcd opens its own): at a
// million keys of 512 bytes that read a gigabyte, all of it resident in
// the server's mapping of the file.
var boltOptions = &bolt.Options{Timeout: time.Second, FreelistType: bolt.FreelistMapType}

// open opens the file for writing, creating it (and its buckets) at the
// first write. f.mu is held.
func (f *File) open() error {
	if f.db != nil {
		return nil
	}
	db, err := bolt.Open(f.path, 0o600, boltOptions)
	if err != nil {
		return fmt.Errorf("sequence file %s: %w", f.path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(metaBucket)
		if err == nil {
			err = meta.Put(formatKey, []byte(format))
		}
		for _, b := range [][]byte{marksBucket, logBucket} {
			if err == nil {
				_, err = tx.CreateBucketIfNotExists(b)
			}
		}
		return err
	})
	if err != nil {
		db.Close()
		return fmt.Errorf("sequence file %s: %w", f.path, err)
	}
	f.db, f.dirUnsynced = db, true // it may be new
	return nil
}

// MarkDirty records that a run is on, before a clean restart hands out
// any of the values the last run left reserved (Restart.Clean): a crash
// after it must leave a file that resumes each key above its
// reservation, not at its last value.
func (f *File) MarkDirty() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.open(); err != nil {
		return err
	}
	return f.update(func(tx *bolt.Tx) error { return f.mark(tx, dirty) })
}

// Path is where the file is.
func (f *File) Path() string { return f.path }

// Folds is how many times the log was folded into the marks.
func (f *File) Folds() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.folds
}

// Close closes the file.
func (f *File) Close() error {
	f.stopFold()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.db == nil {
		return nil
	}
	err := f.db.Close()
	f.db = nil
	return err
}
