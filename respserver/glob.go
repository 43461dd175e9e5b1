package respserver

import "slices"

// A glob pattern as Redis reads one (stringmatchlen): '*' any run of
// bytes, '?' any one byte, '[...]' a set ('^' first negates it, 'a-z' a
// range either way round, '\' escapes; an unclosed set ends with the
// pattern), '\' escapes the next byte. Matching is case-insensitive, as
// CONFIG GET's is.
//
// Written here rather than taken from a library: tidwall/match and
// Redis's own matcher backtrack (`*?*?...*n` costs tidwall/match about
// 100 ms per key), and path.Match, which does not, still walks the whole
// pattern for every position it tries (90 ms for one 64 KiB pattern over
// the config keys). A glob is compiled once, in time linear in the
// pattern (a set's range is a few word operations, not a loop over its
// bytes) and at most up to where it needs more bytes than any key has; a
// key is then matched by a bit-parallel automaton (shift-and): one step
// per byte of the key, each a few word operations, whatever the pattern.
// So a CONFIG GET costs a few operations per byte of its patterns plus a
// bounded amount per pattern and key; cost counts them, and a test holds
// generated patterns to that bound. CONFIG GET matches regardless of
// case, KEYS and SCAN's MATCH exactly, as in Redis.

// glob is a compiled pattern: an automaton over positions 0..len(toks)
// (position i: the first i tokens matched), as bit sets of words words.
// Runs of stars are one star. A glob may be compiled again, reusing its
// buffers.
type glob struct {
	exact bool // case matters (KEYS); else both sides are lower-cased (CONFIG GET)
	toks  []globToken
	need  int      // bytes a match takes at least: tokens other than '*'
	words int      // of a position set; 0: the pattern matches nothing
	stars []uint64 // bit i: token i is '*'
	rows  []uint64 // 256 sets: row c, bit i when token i (not '*') takes byte c
	have  [4]uint64
	cost  int // work done compiling and matching, in word operations
}

// globToken is one element of a compiled pattern.
type globToken struct {
	kind byte      // '*', '?', 'c' (the byte c) or '[' (the set in)
	c    byte      // for 'c'
	in   [4]uint64 // for '[': bit b set when byte b matches
}

// compileGlob compiles pattern for strings of at most maxLen bytes.
func compileGlob(p []byte, maxLen int) *glob {
	g := new(glob)
	g.compile(p, maxLen)
	return g
}

// compileExact is compile for a pattern whose case matters.
func (g *glob) compileExact(p []byte, maxLen int) {
	g.exact = true
	g.compileAs(p, maxLen)
}

// compile makes g the pattern p, regardless of case, for strings of at
// most maxLen bytes: a pattern that needs more matches nothing, and is
// read no further. Every byte string is a valid pattern. It costs a step
// per byte read.
func (g *glob) compile(p []byte, maxLen int) {
	g.exact = false
	g.compileAs(p, maxLen)
}

func (g *glob) compileAs(p []byte, maxLen int) {
	g.toks, g.need, g.words, g.have = g.toks[:0], 0, 0, [4]uint64{}
	i := 0
	for ; i < len(p) && g.need <= maxLen; i++ {
		switch p[i] {
		case '*':
			if n := len(g.toks); n > 0 && g.toks[n-1].kind == '*' {
				continue // a run of stars is one star
			}
			g.toks = append(g.toks, globToken{kind: '*'})
			continue
		case '?':
			g.toks = append(g.toks, globToken{kind: '?'})
		case '[':
			var t globToken
			end := t.parseSet(p, i+1, g.fold)
			g.cost += end - i
			i = end
			g.toks = append(g.toks, t)
		case '\\':
			if i+1 < len(p) {
				i++
			}
			g.toks = append(g.toks, globToken{kind: 'c', c: g.fold(p[i])})
		default:
			g.toks = append(g.toks, globToken{kind: 'c', c: g.fold(p[i])})
		}
		g.need++
	}
	g.cost += i
	if g.need > maxLen {
		return
	}
	g.words = len(g.toks)/64 + 1
	g.stars = slices.Grow(g.stars[:0], g.words)[:g.words]
	clear(g.stars)
	for i, t := range g.toks {
		if t.kind == '*' {
			g.stars[i/64] |= 1 << (i % 64)
		}
	}
	g.rows = slices.Grow(g.rows[:0], 256*g.words)[:256*g.words]
}

// row is the set of tokens that take byte c, made the first time c is
// met: a pattern costs a step per token for each byte its keys have, not
// for all 256.
func (g *glob) row(c byte) []uint64 {
	r := g.rows[int(c)*g.words:][:g.words]
	if g.have[c>>6]&(1<<(c&63)) != 0 {
		return r
	}
	clear(r)
	for i, t := range g.toks {
		if t.kind != '*' && t.matches(c) {
			r[i/64] |= 1 << (i % 64)
		}
	}
	g.have[c>>6] |= 1 << (c & 63)
	g.cost += len(g.toks)
	return r
}

// parseSet reads a set that starts at p[i], after its '[', into t and
// returns the index of its ']' (or the last byte of p, if none closes it).
func (t *globToken) parseSet(p []byte, i int, fold func(byte) byte) int {
	t.kind = '['
	neg := i < len(p) && p[i] == '^'
	if neg {
		i++
	}
	for ; i < len(p) && p[i] != ']'; i++ {
		switch {
		case p[i] == '\\' && i+1 < len(p):
			i++
			t.add(fold(p[i]), fold(p[i]))
		case i+2 < len(p) && p[i+1] == '-':
			t.add(fold(p[i]), fold(p[i+2]))
			i += 2
		default:
			t.add(fold(p[i]), fold(p[i]))
		}
	}
	if neg {
		for w := range t.in {
			t.in[w] = ^t.in[w]
		}
	}
	return min(i, len(p)-1)
}

// add puts the bytes from a to b (either way round) in the set, a word at
// a time: a range of 256 bytes costs no more than one of 1.
func (t *globToken) add(a, b byte) {
	if a > b {
		a, b = b, a
	}
	for w := int(a) / 64; w <= int(b)/64; w++ {
		lo, hi := max(int(a), 64*w)-64*w, min(int(b), 64*w+63)-64*w
		t.in[w] |= (^uint64(0) >> (63 - hi)) &^ (1<<lo - 1)
	}
}

func (t *globToken) matches(c byte) bool {
	switch t.kind {
	case '?':
		return true
	case 'c':
		return t.c == c
	}
	return t.in[c>>6]&(1<<(c&63)) != 0
}

// match reports whether s matches the whole pattern. The state is the set
// of positions the bytes so far reach: a byte moves each position past a
// token that takes it, and keeps each star's (shift-and). It costs a few
// word operations per byte of s and word of state, whatever the pattern.
func (g *glob) match(s string) bool {
	if g.need > len(s) || g.words == 0 {
		return false
	}
	var buf [8]uint64
	state := buf[:0]
	if g.words > len(buf) {
		state = make([]uint64, 0, g.words)
	}
	state = append(state, 1)
	state = state[:g.words]
	g.closeStars(state)
	for i := 0; i < len(s); i++ {
		takes := g.row(g.fold(s[i]))
		var carry, alive uint64
		for w := range state {
			moved := state[w] & takes[w]
			state[w] = moved<<1 | carry | state[w]&g.stars[w]
			carry = moved >> 63
			alive |= state[w]
		}
		g.cost += g.words
		if alive == 0 {
			return false
		}
		g.closeStars(state)
	}
	end := len(g.toks)
	return state[end/64]&(1<<(end%64)) != 0
}

// closeStars adds to state the position past each star it holds: a star
// may match no bytes. (No two stars are adjacent, so one pass does.)
func (g *glob) closeStars(state []uint64) {
	var carry uint64
	for w := range state {
		past := state[w] & g.stars[w]
		state[w] |= past<<1 | carry
		carry = past >> 63
	}
}

// fold is c as g compares it.
func (g *glob) fold(c byte) byte {
	if g.exact {
		return c
	}
	return lower(c)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
