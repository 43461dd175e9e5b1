// Package publicid turns the numbers idserver hands out (IDs, sequence
// values) into short public strings and back, so that what an outsider
// sees (a URL, an order number on a receipt) need not be the number kept
// inside. It is pure: no I/O, and encoding and decoding allocate nothing.
//
// A Codec has two modes.
//
// Without a key it is exactly Sqids (https://sqids.org) for a list of one
// number: its alphabet shuffle, minimum length and default blocklist, so
// that any Sqids library decodes its strings. Sqids is an encoding, not
// encryption: it hides nothing from a determined reader, who can decode
// the strings and so read order and count off them.
//
// With a key (AES-128, -192 or -256) the low 63 bits of the number go
// through FF1, the format-preserving encryption of NIST SP 800-38G Rev. 1,
// radix 2, 63 numerals; the top bit is kept and goes into the tweak. The
// result is written in the alphabet in a fixed length L, at least
// max(L0, min length), where L0 is the smallest length with at least four
// slots of 2^63 values (11 characters for 62 letters, 17 for 16):
//
//	v = s*2^63 + FF1(K, tweak(L, t, hi), n mod 2^63),  s = 2t + hi
//
// written most significant digit first in exactly L characters. t is the
// variant: the first t whose string spells no blocklisted word is the
// public string; where every slot of length L is blocked, length L+1
// is used. Decoding reverses it and accepts a string only if encoding
// its number gives it back (one canonical string per number). Without
// the key, strings show neither the order nor the count of the numbers
// behind them; the cipher's security is FF1's.
//
// With 62 letters a number below 2^63 takes 11 characters, 12 only when
// its three 11-character variants are all blocked: none of 4,000,000
// random numbers did, and 0.045% used their second variant
// (TestKeyedLength with PUBLICID_MEASURE=4000000).
package publicid

import (
	"cmp"
	"crypto/aes"
	"errors"
	"fmt"
	"sync"
)

// DefaultAlphabet is Sqids' default alphabet: URL-safe, 62 letters.
const DefaultAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// MaxMinLength is the largest Settings.MinLength: it keeps keyed
// strings' values within 128-bit arithmetic and short.
const MaxMinLength = 20

// MinKeyedAlphabet is the smallest alphabet New takes with a key: with 16
// letters a 63-bit value takes 17 characters.
const MinKeyedAlphabet = 16

// MaxLen is the longest string a Codec writes or reads: a Sqids string of
// 2^64-1 in a 3-letter alphabet (a prefix and 64 binary digits).
const MaxLen = 65

// maxKeyedLen bounds the lengths keyed encoding tries: past L0 each
// length multiplies the variants by the alphabet's size, so it is never
// reached in practice.
const maxKeyedLen = 40

// ErrBlocked is returned by Append for a number every string of which
// spells a blocklisted word (Sqids' "reached max attempts to re-generate
// the id"): only a small alphabet with a long blocklist can meet it.
var ErrBlocked = errors.New("publicid: every string of this number is blocklisted")

// Codec encodes numbers into public strings and back. It is safe for
// concurrent use.
type Codec struct {
	alphabet []byte     // Sqids: shuffled, as Sqids does at New; keyed: as given
	pos      [256]int16 // index of each byte in alphabet; -1 for none
	minLen   int
	blocked  blocklist

	// Sqids mode: rr[o] is the alphabet rotated by o and reversed (the
	// separator, then the digits); pad[o] the padding that follows an
	// id written with offset o, up to minLen.
	rr, pad [][]byte

	keyed *keyed // nil: Sqids mode
}

// Settings configure a Codec. The zero value is Sqids with its defaults.
type Settings struct {
	// Alphabet is the letters strings are written in, checked as Sqids
	// checks them (at least 3, no repeats) and printable ASCII; with a
	// Key, at least MinKeyedAlphabet. "" means DefaultAlphabet.
	Alphabet string
	// MinLength is the shortest string, 0..MaxMinLength: shorter ones
	// are padded up to it.
	MinLength int
	// Key is an AES key (16, 24 or 32 bytes): strings are encrypted (see
	// the package doc). nil selects Sqids mode.
	Key []byte
}

// Validate reports the first setting New would refuse, without building
// a Codec.
func (s Settings) Validate() error {
	alphabet := cmp.Or(s.Alphabet, DefaultAlphabet)
	if err := checkAlphabet(alphabet); err != nil {
		return err
	}
	if s.MinLength < 0 || s.MinLength > MaxMinLength {
		return fmt.Errorf("min length %d out of range 0..%d", s.MinLength, MaxMinLength)
	}
	if s.Key == nil {
		return nil
	}
	if len(alphabet) < MinKeyedAlphabet {
		return fmt.Errorf("alphabet must be at least %d characters with a key", MinKeyedAlphabet)
	}
	if n := len(s.Key); n != 16 && n != 24 && n != 32 {
		return fmt.Errorf("key must be 16, 24 or 32 bytes (AES-128, -192, -256), not %d", n)
	}
	return nil
}

// New returns the Codec of s, or the error of s.Validate.
func New(s Settings) (*Codec, error) {
	return newCodec(s, defaultBlocklist)
}

// newCodec is New with another blocklist (nil: none), for Sqids' tests.
func newCodec(s Settings, words []string) (*Codec, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	alphabet := cmp.Or(s.Alphabet, DefaultAlphabet)
	c := &Codec{minLen: s.MinLength, blocked: newBlocklist(alphabet, words)}
	if s.Key != nil {
		block, err := aes.NewCipher(s.Key)
		if err != nil {
			return nil, err // Validate checked the key's size
		}
		c.alphabet = []byte(alphabet)
		c.keyed = newKeyed(block, len(alphabet), s.MinLength)
	} else {
		c.alphabet = shuffle([]byte(alphabet))
		c.initSqids()
	}
	for i := range c.pos {
		c.pos[i] = -1
	}
	for i, ch := range c.alphabet {
		c.pos[ch] = int16(i)
	}
	return c, nil
}

// checkAlphabet checks an alphabet as Sqids does, and that it is printable
// ASCII: a configuration line holds it, and a reply must not need quoting.
func checkAlphabet(a string) error {
	if len(a) < 3 {
		return errors.New("alphabet length must be at least 3")
	}
	var seen [256]bool
	for i := 0; i < len(a); i++ {
		ch := a[i]
		if ch <= ' ' || ch > '~' {
			return fmt.Errorf("alphabet must be printable ASCII without spaces (byte %d: %q)", i, ch)
		}
		if seen[ch] {
			return fmt.Errorf("alphabet must contain unique characters (%q repeats)", ch)
		}
		seen[ch] = true
	}
	return nil
}

// Keyed reports whether c encrypts (a key was given).
func (c *Codec) Keyed() bool { return c.keyed != nil }

// Append appends n's public string to dst. It fails only with ErrBlocked.
func (c *Codec) Append(dst []byte, n uint64) ([]byte, error) {
	if c.keyed != nil {
		return c.appendKeyed(dst, n)
	}
	return c.appendSqids(dst, n)
}

// Decode returns the number whose public string s is, and false for a
// string no number encodes as: wrong alphabet or length, or not the
// canonical string of the number it decodes to.
func (c *Codec) Decode(s []byte) (uint64, bool) {
	if len(s) == 0 || len(s) > MaxLen {
		return 0, false
	}
	var n uint64
	var ok, first bool
	if c.keyed != nil {
		n, ok, first = c.decodeKeyed(s)
	} else {
		n, ok = c.decodeSqids(s)
	}
	switch {
	case !ok:
		return 0, false
	case first:
		// The first variant at the first length: encoding n tries it
		// first and writes exactly s, so s is n's string if it is clean
		// (no second encryption).
		if c.blocked.match(s) {
			return 0, false
		}
		return n, true
	}
	// Canonical: decoding maps many strings to a number (Sqids' other
	// offsets and paddings, the keyed mode's blocked variants); only the
	// one Append writes is the number's.
	var buf [MaxLen]byte
	enc, err := c.Append(buf[:0], n)
	if err != nil || string(enc) != string(s) {
		return 0, false
	}
	return n, true
}

// scratch is the AES blocks of one call: a cipher.Block's Encrypt is an
// interface call, so buffers on the stack would escape and allocate each
// time; a pool keeps them.
type scratch struct{ in, out [16]byte }

var scratches = sync.Pool{New: func() any { return new(scratch) }}
