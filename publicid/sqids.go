package publicid

import "math/bits"

// shuffle is Sqids' deterministic shuffle, in place.
func shuffle(a []byte) []byte {
	for i, j := 0, len(a)-1; j > 0; i, j = i+1, j-1 {
		r := (i*j + int(a[i]) + int(a[j])) % len(a)
		a[i], a[r] = a[r], a[i]
	}
	return a
}

// initSqids precomputes, for every offset, the alphabet Sqids encodes
// with and the padding it appends, so that encoding copies bytes only.
func (c *Codec) initSqids() {
	n := len(c.alphabet)
	c.rr = make([][]byte, n)
	c.pad = make([][]byte, n)
	for o := range n {
		a := append(append([]byte{}, c.alphabet[o:]...), c.alphabet[:o]...)
		for i, j := 0, n-1; i < j; i, j = i+1, j-1 {
			a[i], a[j] = a[j], a[i]
		}
		c.rr[o] = a
		// Sqids pads with the separator, then with successive shuffles
		// of the alphabet, taking what it needs of each.
		pad := []byte{a[0]}
		cur := append([]byte{}, a...)
		for len(pad) < c.minLen {
			pad = append(pad, shuffle(cur)...)
		}
		c.pad[o] = pad
	}
}

// appendSqids is Sqids' encode of the list [n].
func (c *Codec) appendSqids(dst []byte, n uint64) ([]byte, error) {
	size := len(c.alphabet)
	start := len(dst)
	offset := (1 + int(c.alphabet[n%uint64(size)])) % size
	for inc := 0; inc <= size; inc++ { // Sqids gives up past len(alphabet) retries
		o := (offset + inc) % size
		dst = append(dst[:start], c.alphabet[o])
		digits := c.rr[o][1:]
		var tmp [64]byte
		i := len(tmp)
		base := uint64(len(digits))
		for x := n; ; {
			i--
			tmp[i] = digits[x%base]
			x /= base
			if x == 0 {
				break
			}
		}
		dst = append(dst, tmp[i:]...)
		if l := len(dst) - start; l < c.minLen {
			dst = append(dst, c.pad[o][:c.minLen-l]...)
		}
		if !c.blocked.match(dst[start:]) {
			return dst, nil
		}
	}
	return dst[:start], ErrBlocked
}

// decodeSqids reads the number of a one-number Sqids string; Decode
// checks that it is canonical.
func (c *Codec) decodeSqids(s []byte) (uint64, bool) {
	size := len(c.alphabet)
	o := int(c.pos[s[0]])
	if o < 0 {
		return 0, false
	}
	base := uint64(size - 1)
	var n uint64
	digits := 0
	for _, ch := range s[1:] {
		a := int(c.pos[ch])
		if a < 0 {
			return 0, false
		}
		// rr[o][j] is alphabet[(o-1-j) mod size]; j 0 is the separator
		// that ends the number.
		j := ((o-1-a)%size + size) % size
		if j == 0 {
			break
		}
		hi, lo := bits.Mul64(n, base)
		lo, carry := bits.Add64(lo, uint64(j-1), 0)
		if hi != 0 || carry != 0 {
			return 0, false
		}
		n = lo
		digits++
	}
	return n, digits > 0
}
