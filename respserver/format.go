package respserver

import "strconv"

// digitPairs holds "00" to "99", for formatting two digits at a time.
var digitPairs = func() (t [200]byte) {
	for i := range 100 {
		t[2*i], t[2*i+1] = byte('0'+i/10), byte('0'+i%10)
	}
	return t
}()

// appendBulkID appends id as a RESP bulk string.
func appendBulkID(b []byte, id int64) []byte {
	var d [20]byte
	digits := strconv.AppendInt(d[:0], id, 10)
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(digits)), 10)
	b = append(b, '\r', '\n')
	b = append(b, digits...)
	return append(b, '\r', '\n')
}

// bulkIDs formats the IDs of one MGETID as RESP bulk strings. They differ
// only in their low 21 bits, a span of 7 decimal digits, so the digits
// above the last 8 (and the length prefix) are formatted once for a run of
// IDs that share them, and only the last 8 per ID: most of MGETID's time
// went to formatting.
type bulkIDs struct {
	hi     int64
	prefix [24]byte // "$<len>\r\n" and the digits of hi
	n      int      // bytes of prefix in use; 0: none yet
}

const lowDigits = 1e8

func (f *bulkIDs) append(b []byte, id int64) []byte {
	if id < lowDigits {
		return appendBulkID(b, id)
	}
	hi, lo := id/lowDigits, uint32(id%lowDigits)
	if hi != f.hi || f.n == 0 {
		var d [20]byte
		digits := strconv.AppendInt(d[:0], hi, 10)
		p := append(f.prefix[:0], '$')
		p = strconv.AppendInt(p, int64(len(digits)+8), 10)
		p = append(p, '\r', '\n')
		p = append(p, digits...)
		f.hi, f.n = hi, len(p)
	}
	b = append(b, f.prefix[:f.n]...)
	var d [10]byte
	for i := 6; i >= 0; i -= 2 {
		q := lo / 100
		r := (lo - q*100) * 2
		d[i], d[i+1] = digitPairs[r], digitPairs[r+1]
		lo = q
	}
	d[8], d[9] = '\r', '\n'
	return append(b, d[:]...)
}
