package publicid

import (
	"crypto/cipher"
	"encoding/binary"
	"math/bits"
)

// FF1 (NIST SP 800-38G Rev. 1, section 5.1) for this one case: radix 2,
// n = 63 numerals (the number's low 63 bits, most significant first), a
// tweak of 4 bytes. Then u = 31, v = 32, b = 4 and d = 8, Q is one AES
// block, and P (which depends on the lengths only, not on the tweak's
// bytes) is encrypted once, at New.
const (
	ffN      = 63
	ffU      = ffN / 2
	ffV      = ffN - ffU
	ffRounds = 10
	tweakLen = 4
	mask63   = 1<<63 - 1
)

// maxSlots caps the slots counted at a length: the variant t goes into
// the tweak in 2 bytes, and no number ever needs so many.
const maxSlots = 1 << 16

type keyed struct {
	block cipher.Block
	encP  [16]byte // CIPH_K(P)
	radix uint64
	start int // max(L0, min length)
	// slots[L] is floor(radix^L / 2^63), capped at maxSlots: how many
	// blocks of 2^63 values strings of length L hold.
	slots [maxKeyedLen + 1]uint64
}

func newKeyed(block cipher.Block, radix, minLen int) *keyed {
	k := &keyed{block: block, radix: uint64(radix)}
	p := [16]byte{1, 2, 1, 0, 0, 2, 10, ffU % 256}
	binary.BigEndian.PutUint32(p[8:], ffN)
	binary.BigEndian.PutUint32(p[12:], tweakLen)
	block.Encrypt(k.encP[:], p[:])
	// radix^L as a 128-bit hi:lo; past 2^80 every count is capped.
	var hi, lo uint64 = 0, 1
	for l := 1; l <= maxKeyedLen; l++ {
		if hi < maxSlots {
			h, l1 := bits.Mul64(lo, k.radix)
			hi, lo = hi*k.radix+h, l1
		}
		k.slots[l] = maxSlots
		if hi < maxSlots {
			k.slots[l] = min(hi<<1|lo>>63, maxSlots) // floor(hi:lo / 2^63)
		}
		if k.start == 0 && k.slots[l] >= 4 {
			k.start = max(l, minLen)
		}
	}
	return k
}

// tweak is FF1's tweak for a string of length l, variant t and top bit
// hi: each (l, t, hi) is its own permutation.
func tweak(l int, t, hi uint64) [tweakLen]byte {
	return [tweakLen]byte{byte(l), byte(hi), byte(t >> 8), byte(t)}
}

// round is FF1's y for round i: NUM(PRF(P || Q))'s first d bytes, where
// Q = T || 0^7 || [i] || [NUM(B)]^4.
func (k *keyed) round(sc *scratch, tw *[tweakLen]byte, i int, b uint64) uint64 {
	q := &sc.in
	copy(q[:4], tw[:])
	q[4], q[5], q[6], q[7], q[8], q[9], q[10] = 0, 0, 0, 0, 0, 0, 0
	q[11] = byte(i)
	binary.BigEndian.PutUint32(q[12:], uint32(b))
	for j := range q {
		q[j] ^= k.encP[j]
	}
	k.block.Encrypt(sc.out[:], q[:])
	return binary.BigEndian.Uint64(sc.out[:8])
}

// encrypt is FF1.Encrypt of the 63-bit x.
func (k *keyed) encrypt(sc *scratch, tw *[tweakLen]byte, x uint64) uint64 {
	a, b := x>>ffV, x&(1<<ffV-1)
	for i := range ffRounds {
		m := uint(ffU)
		if i%2 == 1 {
			m = ffV
		}
		c := (a + k.round(sc, tw, i, b)) & (1<<m - 1)
		a, b = b, c
	}
	return a<<ffV | b
}

// decrypt is FF1.Decrypt of the 63-bit y.
func (k *keyed) decrypt(sc *scratch, tw *[tweakLen]byte, y uint64) uint64 {
	a, b := y>>ffV, y&(1<<ffV-1)
	for i := ffRounds - 1; i >= 0; i-- {
		m := uint(ffU)
		if i%2 == 1 {
			m = ffV
		}
		c := (b - k.round(sc, tw, i, a)) & (1<<m - 1)
		b, a = a, c
	}
	return a<<ffV | b
}

// appendKeyed writes the first variant of n that spells no blocklisted
// word, at the shortest length that has one.
func (c *Codec) appendKeyed(dst []byte, n uint64) ([]byte, error) {
	k := c.keyed
	sc := scratches.Get().(*scratch)
	defer scratches.Put(sc)
	hi, x := n>>63, n&mask63
	start := len(dst)
	for l := k.start; l <= maxKeyedLen; l++ {
		for s := hi; s < k.slots[l]; s += 2 {
			t := s >> 1
			tw := tweak(l, t, hi)
			y := k.encrypt(sc, &tw, x)
			dst = c.appendValue(dst[:start], l, s>>1, s<<63|y)
			if !c.blocked.match(dst[start:]) {
				return dst, nil
			}
		}
	}
	return dst[:start], ErrBlocked
}

// appendValue writes the 128-bit vh:vl in exactly l digits of the
// alphabet, most significant first.
func (c *Codec) appendValue(dst []byte, l int, vh, vl uint64) []byte {
	var buf [maxKeyedLen]byte
	r := c.keyed.radix
	for i := l - 1; i >= 0; i-- {
		var rem uint64
		vh, rem = bits.Div64(0, vh, r)
		vl, rem = bits.Div64(rem, vl, r)
		buf[i] = c.alphabet[rem]
	}
	return append(dst, buf[:l]...)
}

// decodeKeyed reads a keyed string's number, and whether s is its first
// variant at the first length; Decode checks that it is canonical.
func (c *Codec) decodeKeyed(s []byte) (n uint64, ok, first bool) {
	k := c.keyed
	l := len(s)
	if l < k.start || l > maxKeyedLen {
		return 0, false, false
	}
	var vh, vl uint64
	for _, ch := range s {
		d := c.pos[ch]
		if d < 0 {
			return 0, false, false
		}
		h1, l1 := bits.Mul64(vl, k.radix)
		h2, l2 := bits.Mul64(vh, k.radix)
		h, c1 := bits.Add64(h1, l2, 0)
		lo, c2 := bits.Add64(l1, uint64(d), 0)
		h, c3 := bits.Add64(h, 0, c2)
		if h2 != 0 || c1 != 0 || c3 != 0 || h >= maxSlots {
			return 0, false, false // past every slot
		}
		vh, vl = h, lo
	}
	slot := vh<<1 | vl>>63
	if slot >= k.slots[l] {
		return 0, false, false
	}
	hi, t := slot&1, slot>>1
	tw := tweak(l, t, hi)
	sc := scratches.Get().(*scratch)
	x := k.decrypt(sc, &tw, vl&mask63)
	scratches.Put(sc)
	return hi<<63 | x, true, l == k.start && t == 0
}
