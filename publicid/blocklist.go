package publicid

import "strings"

// blocklist matches strings against words as Sqids does: case-insensitive;
// a string or word of at most 3 characters only if they are equal; a word
// with a digit only at the start or the end of the string; any other word
// anywhere in it.
type blocklist struct {
	short map[string]struct{} // the words of 3 characters
	// long indexes the longer words by their first three bytes, so that
	// a string is checked at each position against the few words that
	// begin there, not against every word.
	long map[[3]byte][]word
	// starts has a bit for each three letters some long word begins
	// with: most positions of a string begin none, and are passed by
	// one bit instead of a map lookup (the lookups were a third of a
	// keyed PUBLICID's cost).
	starts [tri * tri * tri / 64]uint64
}

// tri is how many letters words are made of: a-z and 0-9, lower-cased
// (Sqids' default blocklist has no others).
const tri = 36

// triIndex is c's place among the letters of words, or -1.
func triIndex(c byte) int {
	switch {
	case 'a' <= c && c <= 'z':
		return int(c - 'a')
	case '0' <= c && c <= '9':
		return 26 + int(c-'0')
	}
	return -1
}

// startIndex is the bit of starts for a, b, c, or -1 if one of them is
// no word's letter.
func startIndex(a, b, c byte) int {
	i, j, k := triIndex(a), triIndex(b), triIndex(c)
	if i < 0 || j < 0 || k < 0 {
		return -1
	}
	return (i*tri+j)*tri + k
}

type word struct {
	s      string
	digits bool // has a digit: matches only as a prefix or a suffix
}

// newBlocklist filters words for alphabet as Sqids does: lower-cased,
// those shorter than 3 dropped, and those with a letter not in the
// lower-cased alphabet dropped.
func newBlocklist(alphabet string, words []string) blocklist {
	b := blocklist{short: map[string]struct{}{}, long: map[[3]byte][]word{}}
	lower := strings.ToLower(alphabet)
	for _, w := range words {
		w = strings.ToLower(w)
		if len(w) < 3 || strings.ContainsFunc(w, func(r rune) bool { return !strings.ContainsRune(lower, r) }) {
			continue
		}
		if len(w) == 3 {
			b.short[w] = struct{}{}
			continue
		}
		k := [3]byte{w[0], w[1], w[2]}
		b.long[k] = append(b.long[k], word{w, strings.ContainsAny(w, "0123456789")})
		if i := startIndex(w[0], w[1], w[2]); i >= 0 {
			b.starts[i/64] |= 1 << (i % 64)
		} else {
			for i := range b.starts { // a word of other letters: every position is looked up
				b.starts[i] = ^uint64(0)
			}
		}
	}
	return b
}

// match reports whether id spells a word of b.
func (b *blocklist) match(id []byte) bool {
	var buf [MaxLen]byte
	low := buf[:len(id)]
	for i, ch := range id {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		low[i] = ch
	}
	if len(low) <= 3 {
		_, ok := b.short[string(low)]
		return ok
	}
	for i := 0; i+4 <= len(low); i++ {
		if j := startIndex(low[i], low[i+1], low[i+2]); j >= 0 && b.starts[j/64]&(1<<(j%64)) == 0 {
			continue
		}
		for _, w := range b.long[[3]byte{low[i], low[i+1], low[i+2]}] {
			end := i + len(w.s)
			if end > len(low) || string(low[i:end]) != w.s {
				continue
			}
			if !w.digits || i == 0 || end == len(low) {
				return true
			}
		}
	}
	return false
}
