package sequence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
)

// checkPages checks the page structure of a bbolt file before bbolt reads
// it. bbolt trusts its pages: a damaged file whose branch page points at
// itself sends its cursor down for ever, growing memory by hundreds of
// megabytes a second (FuzzOpenFile found one), and a bad count makes it
// read out of bounds. Here every page of the tree in force (and of every
// bucket in it) must lie inside the file, below the high water mark, be
// reached once and be of the right type, and every element must lie
// inside its page; then a walk of it is finite and in bounds.
//
// The file is read a page at a time (r, of size bytes), neither read
// whole nor mapped: at seq-max-keys keys of seq-max-key-bytes it is a
// gigabyte, which would count in the server's memory.
//
// The layout read is bbolt's on-disk format, version 2 (unchanged since
// boltdb 1.0; bbolt refuses any other), little-endian as on the machines
// idserver runs on.
func checkPages(r io.ReaderAt, size int64) (*walker, error) {
	head := make([]byte, min(size, 2*65536))
	if _, err := r.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	m, err := metaInForce(head)
	if err != nil {
		return nil, err
	}
	w := &walker{r: r, pageSize: uint64(m.pageSize), hwm: m.pgid, root: m.root}
	if uint64(size) < m.pgid*w.pageSize {
		return nil, fmt.Errorf("cut short: %d bytes, where its pages take %d", size, m.pgid*w.pageSize)
	}
	w.seen = make([]uint64, (w.hwm+63)/64)
	if err := w.freelist(m.freelist); err != nil {
		return nil, err
	}
	if err := w.tree(m.root, 0); err != nil {
		return nil, err
	}
	return w, nil
}

// bbolt's format: a page header, and the elements of branch and leaf
// pages.
const (
	pageHeaderSize  = 16
	elementSize     = 16
	branchPageFlag  = 0x01
	leafPageFlag    = 0x02
	freelistFlag    = 0x10
	bucketLeafFlag  = 0x01
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	noFreelist      = 0xffffffffffffffff
	maxBucketDepth  = 64 // a healthy file of a billion keys is a handful of levels deep
	bucketValueSize = 16 // a bucket's root page and sequence
)

type meta struct {
	pageSize             uint32
	root, freelist, pgid uint64
	txid                 uint64
}

// metaInForce is the meta page bbolt uses: of the two that are valid,
// the one with the higher transaction id.
func metaInForce(data []byte) (meta, error) {
	m0, err0 := readMeta(data, 0)
	sizes := []int{4096, 1024, 2048, 8192, 16384, 32768, 65536} // where the second may be, as bbolt looks
	if err0 == nil {
		sizes = []int{int(m0.pageSize)}
	}
	var m1 meta
	err1 := errors.New("no second meta page")
	for _, size := range sizes {
		if m1, err1 = readMeta(data, size); err1 == nil {
			break
		}
	}
	switch {
	case err0 == nil && err1 == nil && m1.txid > m0.txid, err0 != nil && err1 == nil:
		return m1, nil
	case err0 == nil:
		return m0, nil
	}
	return meta{}, fmt.Errorf("not a bbolt database: %w", err0)
}

// readMeta reads and validates the meta page at off.
func readMeta(data []byte, off int) (meta, error) {
	if off+pageHeaderSize+64 > len(data) {
		return meta{}, errors.New("too short")
	}
	b := data[off+pageHeaderSize:]
	le := binary.LittleEndian
	h := fnv.New64a()
	h.Write(b[:56])
	switch {
	case le.Uint32(b) != boltMagic:
		return meta{}, errors.New("no bbolt magic number")
	case le.Uint32(b[4:]) != boltVersion:
		return meta{}, fmt.Errorf("bbolt format version %d", le.Uint32(b[4:]))
	case le.Uint64(b[56:]) != h.Sum64():
		return meta{}, errors.New("meta page checksum mismatch")
	}
	m := meta{pageSize: le.Uint32(b[8:]), root: le.Uint64(b[16:]), freelist: le.Uint64(b[32:]), pgid: le.Uint64(b[40:]), txid: le.Uint64(b[48:])}
	if m.pageSize < pageHeaderSize+64 || m.pageSize > 1<<20 {
		return meta{}, fmt.Errorf("page size %d", m.pageSize)
	}
	return m, nil
}

// walker checks pages, each reached once, and hands the pairs of the
// buckets it is asked for to visit.
type walker struct {
	r        io.ReaderAt
	pageSize uint64
	hwm      uint64   // pages are below it
	root     uint64   // the root bucket's page
	seen     []uint64 // a bit a page; nil: pages are not checked again
	wins     []window // a window for each depth: the pages above stay in use
	// visit, if not nil, is given each pair (not a bucket) of the
	// buckets walked, in key order; buckets, if not nil, each bucket's
	// name and value, and the walk does not go down into them.
	visit   func(k, v []byte) error
	buckets func(k, v []byte)
}

// page reads page id, with its overflow pages, at depth, after checking
// that it lies in the file, below the high water mark, and was not
// reached before. The page stays valid until the next page read at the
// same depth: the pages above stay in use.
func (w *walker) page(id uint64, depth int) ([]byte, error) {
	if id < 2 || id >= w.hwm {
		return nil, fmt.Errorf("page %d out of range 2..%d", id, w.hwm-1)
	}
	for len(w.wins) <= depth {
		w.wins = append(w.wins, window{})
	}
	win := &w.wins[depth]
	off := int64(id * w.pageSize)
	head, err := win.at(w.r, off, pageHeaderSize)
	if err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	overflow := uint64(binary.LittleEndian.Uint32(head[12:]))
	if overflow >= w.hwm-id {
		return nil, fmt.Errorf("page %d: %d overflow pages past the end", id, overflow)
	}
	if w.seen != nil {
		for p := id; p <= id+overflow; p++ {
			if w.seen[p/64]&(1<<(p%64)) != 0 {
				return nil, fmt.Errorf("page %d reached twice", p)
			}
			w.seen[p/64] |= 1 << (p % 64)
		}
	}
	p, err := win.at(w.r, off, int((overflow+1)*w.pageSize))
	if err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	return p, nil
}

// readAhead is what a window reads at once: pages of a tree mostly lie
// in order in the file, so one read brings many of them. A page at a
// time, a restart at the bounds (a million keys of 512 bytes) made 1.8
// million reads.
const readAhead = 256 << 10

// window is bytes of the file read ahead, from off.
type window struct {
	off int64
	b   []byte
}

// at returns the n bytes of r at off, from the window if it holds them,
// else read into it (ahead as far as readAhead, or as the file goes); a
// longer run of pages is read into a buffer of its own, not kept.
func (win *window) at(r io.ReaderAt, off int64, n int) ([]byte, error) {
	if off >= win.off && off+int64(n) <= win.off+int64(len(win.b)) {
		return win.b[off-win.off:][:n], nil
	}
	buf := win.b[:cap(win.b)]
	if n > readAhead {
		buf = make([]byte, n)
	} else if len(buf) < readAhead {
		buf = make([]byte, readAhead)
	}
	got, err := r.ReadAt(buf, off)
	if got < n {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if n <= readAhead {
		win.off, win.b = off, buf[:got]
	}
	return buf[:n], nil
}

// bucket walks the pairs of the bucket name of the root bucket, in key
// order, calling visit for each; a missing bucket is an error if must.
// The file was checked: its pages are not checked again.
func (w *walker) bucket(name []byte, must bool, visit func(k, v []byte) error) error {
	w.seen = nil
	var found []byte
	w.buckets = func(k, v []byte) {
		if string(k) == string(name) {
			found = slices.Clone(v)
		}
	}
	err := w.tree(w.root, 0)
	w.buckets = nil
	switch {
	case err != nil:
		return err
	case found == nil && must:
		return fmt.Errorf("the bucket %s is missing", name)
	case found == nil:
		return nil
	}
	w.visit = visit
	defer func() { w.visit = nil }()
	if root := binary.LittleEndian.Uint64(found); root != 0 {
		return w.tree(root, 1)
	}
	return w.elements(found[bucketValueSize:], 0, 1)
}

// freelist checks the freelist page, if the file keeps one.
func (w *walker) freelist(id uint64) error {
	if id == noFreelist {
		return nil
	}
	p, err := w.page(id, 0)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	if binary.LittleEndian.Uint16(p[8:])&freelistFlag == 0 {
		return fmt.Errorf("freelist: page %d is not a freelist page", id)
	}
	count, at := uint64(binary.LittleEndian.Uint16(p[10:])), uint64(pageHeaderSize)
	if count == 0xffff { // the real count is the first element
		count, at = binary.LittleEndian.Uint64(p[pageHeaderSize:]), pageHeaderSize+8
	}
	if count > (uint64(len(p))-at)/8 {
		return fmt.Errorf("freelist: %d ids do not fit in its pages", count)
	}
	for i := range count {
		if free := binary.LittleEndian.Uint64(p[at+8*i:]); free < 2 || free >= w.hwm {
			return fmt.Errorf("freelist: page %d out of range 2..%d", free, w.hwm-1)
		}
	}
	return nil
}

// tree checks the bucket whose root page is id, and the buckets in it.
func (w *walker) tree(id uint64, depth int) error {
	if depth > maxBucketDepth {
		return errors.New("pages nested too deep")
	}
	p, err := w.page(id, depth)
	if err != nil {
		return err
	}
	return w.elements(p, id, depth)
}

// elements checks the elements of page p (id, for messages; 0 for an
// inline bucket's page) and goes down into its children.
func (w *walker) elements(p []byte, id uint64, depth int) error {
	le := binary.LittleEndian
	flags, count := le.Uint16(p[8:]), uint64(le.Uint16(p[10:]))
	if pageHeaderSize+count*elementSize > uint64(len(p)) {
		return fmt.Errorf("page %d: %d elements do not fit in it", id, count)
	}
	for i := range count {
		at := pageHeaderSize + i*elementSize
		e := p[at:]
		switch {
		case flags&branchPageFlag != 0 && id != 0:
			pos, ksize := uint64(le.Uint32(e)), uint64(le.Uint32(e[4:]))
			if at+pos+ksize > uint64(len(p)) {
				return fmt.Errorf("page %d: a key past its end", id)
			}
			if err := w.tree(le.Uint64(e[8:]), depth+1); err != nil {
				return err
			}
		case flags&leafPageFlag != 0:
			if err := w.leaf(p, e, at, id, depth); err != nil {
				return err
			}
		default:
			return fmt.Errorf("page %d: neither branch nor leaf (flags %#x)", id, flags)
		}
	}
	return nil
}

// leaf checks the leaf element e at offset at of page p, and the bucket
// it holds, if any.
func (w *walker) leaf(p, e []byte, at, id uint64, depth int) error {
	le := binary.LittleEndian
	eflags, pos, ksize, vsize := le.Uint32(e), uint64(le.Uint32(e[4:])), uint64(le.Uint32(e[8:])), uint64(le.Uint32(e[12:]))
	end := at + pos + ksize + vsize
	if end > uint64(len(p)) || end < at {
		return fmt.Errorf("page %d: a key or value past its end", id)
	}
	k, v := p[at+pos:at+pos+ksize], p[at+pos+ksize:end]
	switch {
	case eflags&bucketLeafFlag == 0 && w.visit != nil:
		return w.visit(k, v)
	case eflags&bucketLeafFlag == 0:
		return nil
	case w.buckets != nil:
		w.buckets(k, v)
		return nil
	}
	if len(v) < bucketValueSize {
		return fmt.Errorf("page %d: a bucket's value is %d bytes", id, len(v))
	}
	if root := le.Uint64(v); root != 0 {
		return w.tree(root, depth+1)
	}
	inline := v[bucketValueSize:]
	if len(inline) < pageHeaderSize || le.Uint16(inline[8:])&leafPageFlag == 0 {
		return fmt.Errorf("page %d: an inline bucket without a leaf page", id)
	}
	return w.elements(inline, 0, depth+1)
}
