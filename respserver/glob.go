package respserver

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
// pattern and at most up to where it needs more bytes than any key has;
// matching walks two pointers, going back only to the last star, so a key
// costs at most len(key) x len(key) steps whatever the pattern.

// globToken is one element of a compiled pattern.
type globToken struct {
	kind byte      // '*', '?', 'c' (the byte c) or '[' (the set in)
	c    byte      // for 'c'
	in   [4]uint64 // for '[': bit b set when byte b matches
}

// glob is a compiled pattern.
type glob struct {
	toks []globToken
	need int // bytes a match takes at least: tokens other than '*'
}

// compileGlob compiles pattern for strings of at most maxLen bytes: a
// pattern that needs more matches nothing, and is read no further. Every
// byte string is a valid pattern.
func compileGlob(pattern string, maxLen int) glob {
	var g glob
	p := []byte(pattern)
	for i := 0; i < len(p); i++ {
		if g.need > maxLen {
			return glob{need: g.need}
		}
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
			i = t.parseSet(p, i+1)
			g.toks = append(g.toks, t)
		case '\\':
			if i+1 < len(p) {
				i++
			}
			g.toks = append(g.toks, globToken{kind: 'c', c: lower(p[i])})
		default:
			g.toks = append(g.toks, globToken{kind: 'c', c: lower(p[i])})
		}
		g.need++
	}
	return g
}

// parseSet reads a set that starts at p[i], after its '[', into t and
// returns the index of its ']' (or the last byte of p, if none closes it).
func (t *globToken) parseSet(p []byte, i int) int {
	t.kind = '['
	neg := i < len(p) && p[i] == '^'
	if neg {
		i++
	}
	for ; i < len(p) && p[i] != ']'; i++ {
		switch {
		case p[i] == '\\' && i+1 < len(p):
			i++
			t.add(p[i], p[i])
		case i+2 < len(p) && p[i+1] == '-':
			t.add(p[i], p[i+2])
			i += 2
		default:
			t.add(p[i], p[i])
		}
	}
	if neg {
		for w := range t.in {
			t.in[w] = ^t.in[w]
		}
	}
	return min(i, len(p)-1)
}

// add puts the bytes from a to b (either way round) in the set.
func (t *globToken) add(a, b byte) {
	a, b = lower(a), lower(b)
	if a > b {
		a, b = b, a
	}
	for c := int(a); c <= int(b); c++ {
		t.in[c>>6] |= 1 << (c & 63)
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

// match reports whether s matches the whole pattern.
func (g glob) match(s string) bool {
	if g.need > len(s) {
		return false
	}
	ti, si := 0, 0
	star, mark := -1, 0 // the last star seen, and where its run ends in s
	for si < len(s) {
		switch {
		case ti < len(g.toks) && g.toks[ti].kind == '*':
			star, mark = ti, si
			ti++
		case ti < len(g.toks) && g.toks[ti].matches(lower(s[si])):
			ti++
			si++
		case star >= 0: // let the last star take one more byte
			mark++
			ti, si = star+1, mark
		default:
			return false
		}
	}
	for ti < len(g.toks) && g.toks[ti].kind == '*' {
		ti++
	}
	return ti == len(g.toks)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
