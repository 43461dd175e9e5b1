package sequence

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

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
	db       *bolt.DB // nil until the first write
	entry    uint64   // the number of the last log entry
	logBytes int      // what was appended to the log since the last fold
	rec      []byte   // the buffer of the next write's records
	dirty    bool     // a write since the start: the last run did not end cleanly
	folds    uint64
}

// Restart tells what the file said at the start.
type Restart struct {
	Keys int
	// Clean is whether the last run ended with a graceful stop (Release):
	// then every key continues from its last value.
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
	format  = "idserver sequences 2"
	format1 = "idserver sequences 1"
)

// OpenFile reads the sequences stored at path: none if it does not
// exist. A file that is not idserver's sequences, or is corrupt, is an
// error, and is left as it is.
func OpenFile(path string) (*File, []Mark, Restart, error) {
	f := &File{path: path, foldMin: 8 << 20, foldPerKey: 8 * 40}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return f, nil, Restart{Clean: true}, nil
	}
	if err != nil {
		return nil, nil, Restart{}, fmt.Errorf("sequence file %s: %w", path, err)
	}
	if err := checkPages(data); err != nil {
		return nil, nil, Restart{}, fmt.Errorf("sequence file %s: %w (the file is left as it is)", path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, nil, Restart{}, fmt.Errorf("sequence file %s: %w (the file is left as it is)", path, err)
	}
	defer db.Close()
	marks, r, err := f.load(db)
	if err != nil {
		return nil, nil, Restart{}, fmt.Errorf("sequence file %s: %w (the file is left as it is)", path, err)
	}
	return f, marks, r, nil
}

// record is what the file holds of a key: its mark, its last value
// handed out when the mark was written, and whether it exists (born).
type record struct {
	mark, issued int64
	born         bool
}

// load reads every key's mark: the marks bucket, then the log in order.
// checkPages made bbolt's walk safe; a panic of bbolt on damage it finds
// nonetheless is an error here.
func (f *File) load(db *bolt.DB) (marks []Mark, r Restart, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("corrupt: %v", p)
		}
	}()
	byKey := map[string]record{}
	err = db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(metaBucket)
		v := ""
		if meta != nil {
			v = string(meta.Get(formatKey))
		}
		if v != format && v != format1 {
			return errors.New("not a sequences file of idserver (no format key " + format + ")")
		}
		r.Clean = meta.Get(cleanKey) != nil
		if err := each(tx.Bucket(marksBucket), func(k, v []byte) error { return decodeMark(byKey, k, v) }); err != nil {
			return err
		}
		if b := tx.Bucket(oldLogBucket); b != nil {
			if err := b.ForEach(func(k, v []byte) error { f.logBytes += len(v); return decodeEntry(byKey, v, false) }); err != nil {
				return err
			}
		}
		if v == format1 {
			return nil
		}
		return each(tx.Bucket(logBucket), func(k, v []byte) error {
			f.entry = binary.BigEndian.Uint64(k)
			f.logBytes += len(v)
			return decodeEntry(byKey, v, true)
		})
	})
	if err != nil {
		return nil, Restart{}, err
	}
	marks = make([]Mark, 0, len(byKey))
	for k, s := range byKey {
		if !s.born {
			continue // only prepared: no value of it was handed out
		}
		marks = append(marks, Mark{Key: k, Value: s.mark, Born: true})
		if !r.Clean {
			r.Skipped += s.mark - s.issued
		}
	}
	r.Keys = len(marks)
	return marks, r, nil
}

// each calls fn for every pair of b; a missing bucket is an error.
func each(b *bolt.Bucket, fn func(k, v []byte) error) error {
	if b == nil {
		return errors.New("a bucket is missing")
	}
	return b.ForEach(fn)
}

// decodeMark reads a pair of the marks bucket.
func decodeMark(byKey map[string]record, k, v []byte) error {
	if len(v) != 16 {
		return fmt.Errorf("the mark of %q is %d bytes, not 16", clip(string(k)), len(v))
	}
	byKey[string(k)] = record{int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:])), true}
	return nil
}

// A log entry is a list of records, each a key's length and bytes, its
// mark and its last value then, as uvarints, and a byte: 1 if the key
// exists (format 1's log has no such byte: every key in it exists).
func appendRecord(b []byte, key string, s record) []byte {
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, uint64(s.mark))
	b = binary.AppendUvarint(b, uint64(s.issued))
	if s.born {
		return append(b, 1)
	}
	return append(b, 0)
}

// decodeEntry reads the records of a log entry into byKey; flagged says
// whether each ends with its born byte (format 2). A key once born stays
// born.
func decodeEntry(byKey map[string]record, b []byte, flagged bool) error {
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return errors.New("a log entry is cut short")
		}
		key := string(b[k : k+int(n)])
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
		if flagged {
			if len(b) == 0 || b[0] > 1 {
				return errors.New("a log entry is cut short")
			}
			s.born, b = b[0] == 1, b[1:]
		}
		s.born = s.born || byKey[key].born
		byKey[key] = s
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
// one write, or sets its Err. In cluster mode the server keeps in it
// what it took from etcd: its own copy of the marks.
func (f *File) Keep(ts []Take) {
	if !slices.ContainsFunc(ts, func(t Take) bool { return t.Err == nil }) {
		return
	}
	err := f.write(dirty, func(rec []byte) []byte {
		for _, t := range ts {
			if t.Err == nil {
				rec = appendRecord(rec, t.Key, record{t.Last, t.Issued, t.Born})
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

// Set stores v as key's mark; the Table checked that it goes up.
func (f *File) Set(ctx context.Context, key string, v int64, mode SetMode) error {
	return f.write(dirty, func(rec []byte) []byte { return appendRecord(rec, key, record{v, v, true}) })
}

// Release stores the marks of a graceful stop, and that it was one.
func (f *File) Release(ctx context.Context, marks []Mark) error {
	return f.write(clean, func(rec []byte) []byte {
		for _, m := range marks {
			rec = appendRecord(rec, m.Key, record{m.Value, m.Value, m.Born})
		}
		return rec
	})
}

// How a write leaves the file: a graceful stop's is clean, every other
// write says the run is on.
type ending bool

const (
	dirty ending = false
	clean ending = true
)

// keepRec is the largest record buffer a File keeps for its next write.
const keepRec = 1 << 20

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
	err := f.db.Update(func(tx *bolt.Tx) error {
		if err := f.mark(tx, end); err != nil {
			return err
		}
		return f.putEntry(tx, rec)
	})
	if err != nil {
		return fmt.Errorf("sequence file %s: %w", f.path, err)
	}
	f.entry++
	f.logBytes += len(rec)
	return nil
}

// putEntry puts rec in tx as the log's next entry (f.entry+1, which the
// caller counts once tx commits).
func (f *File) putEntry(tx *bolt.Tx, rec []byte) error {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], f.entry+1)
	return tx.Bucket(logBucket).Put(k[:], rec)
}

// FoldDue reports whether the log has grown to eight times what keys
// keys' marks take (about 40 bytes each), and foldMin at least: a fold
// writes every key once (about 0.2 s for 100,000 keys here), so the log
// grows well past the marks between folds. A restart reads it all, about
// 40 MB a second.
func (f *File) FoldDue(keys int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.logBytes > max(f.foldMin, f.foldPerKey*keys)
}

// Fold writes the marks that snapshot returns in place of everything
// stored, in one transaction: the marks bucket, in key order (bbolt
// writes each page once), and an empty log. snapshot runs under the
// File's lock, so no write comes between it and the fold: each of its
// marks must be at least everything written for its key before.
func (f *File) Fold(snapshot func() []Mark) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.open(); err != nil {
		return err
	}
	marks := snapshot()
	slices.SortFunc(marks, func(a, b Mark) int { return strings.Compare(a.Key, b.Key) })
	var rest []byte // the keys bbolt cannot hold as keys (empty, or too long) stay in the log
	err := f.db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(oldLogBucket) != nil {
			if err := tx.DeleteBucket(oldLogBucket); err != nil {
				return err
			}
		}
		for _, name := range [][]byte{marksBucket, logBucket} {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		b := tx.Bucket(marksBucket)
		b.FillPercent = 1 // keys come in order: pages filled up are never split again
		// bbolt keeps what Put is given until the commit: one buffer
		// holds every key and value, never grown (which would move it).
		size := 0
		for _, m := range marks {
			size += len(m.Key) + 16
		}
		buf := make([]byte, 0, size)
		for _, m := range marks {
			if len(m.Key) == 0 || len(m.Key) > bolt.MaxKeySize {
				rest = appendRecord(rest, m.Key, record{m.Reserved, m.Value, true})
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
		if len(rest) == 0 {
			return nil
		}
		return f.putEntry(tx, rest)
	})
	if err != nil {
		return fmt.Errorf("sequence file %s: folding the log: %w", f.path, err)
	}
	if len(rest) > 0 {
		f.entry++
	}
	f.logBytes = 0 // what rest holds is no growth: a fold would write it again
	f.folds++
	return nil
}

// mark records in tx whether the run ended cleanly, when that changes.
func (f *File) mark(tx *bolt.Tx, end ending) error {
	meta := tx.Bucket(metaBucket)
	switch {
	case end == clean:
		f.dirty = false
		return meta.Put(cleanKey, []byte{1})
	case !f.dirty:
		f.dirty = true
		return meta.Delete(cleanKey)
	}
	return nil
}

// open opens the file for writing, creating it (and its buckets) at the
// first write. f.mu is held.
func (f *File) open() error {
	if f.db != nil {
		return nil
	}
	// As etcd opens its own: the freelist is rebuilt at open rather than
	// written at every commit (which costs a write the size of the
	// freelist, and it grows as logs are folded away), and kept in a map.
	db, err := bolt.Open(f.path, 0o600, &bolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
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
	f.db = db
	return nil
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
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.db == nil {
		return nil
	}
	err := f.db.Close()
	f.db = nil
	return err
}
