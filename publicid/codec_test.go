package publicid

import (
	"cmp"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/idserver/idserver/internal/testseed"
)

// codecs are the configurations the property tests run over: Sqids and
// keyed, default and other alphabets and minimum lengths.
func codecs(t testing.TB, rng *rand.Rand) map[string]*Codec {
	key := func(n int) []byte {
		k := make([]byte, n)
		for i := range k {
			k[i] = byte(rng.Uint32())
		}
		return k
	}
	all := map[string]*Codec{}
	for name, cfg := range map[string]struct {
		alphabet string
		min      int
		key      []byte
	}{
		"sqids":            {"", 0, nil},
		"sqids-min10":      {"", 10, nil},
		"sqids-hex":        {"0123456789abcdef", 0, nil},
		"keyed":            {"", 0, key(16)},
		"keyed-min14-k256": {"", 14, key(32)},
		"keyed-hex-k192":   {"0123456789abcdef", 0, key(24)},
	} {
		c, err := New(Settings{Alphabet: cfg.alphabet, MinLength: cfg.min, Key: cfg.key})
		if err != nil {
			t.Fatal(err)
		}
		all[name] = c
	}
	return all
}

// numbers are the edge numbers and n random ones, of every magnitude.
func numbers(rng *rand.Rand, n int) []uint64 {
	nums := []uint64{0, 1, 2, 1<<63 - 1, 1 << 63, math.MaxUint64}
	for range n {
		nums = append(nums, rng.Uint64()>>rng.UintN(64))
	}
	return nums
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Get(t), 0))
	for name, c := range codecs(t, rng) {
		seen := map[string]uint64{}
		for _, n := range numbers(rng, 20000) {
			s, err := c.Append(nil, n)
			if err != nil {
				t.Fatalf("%s: Append(%d): %v", name, n, err)
			}
			if len(s) < c.minLen {
				t.Fatalf("%s: Append(%d) = %q, shorter than %d", name, n, s, c.minLen)
			}
			if got, ok := c.Decode(s); !ok || got != n {
				t.Fatalf("%s: Decode(%q) = %d, %v; want %d", name, s, got, ok, n)
			}
			if m, dup := seen[string(s)]; dup && m != n {
				t.Fatalf("%s: %d and %d both encode as %q", name, m, n, s)
			}
			seen[string(s)] = n
		}
	}
}

// TestCanonical: every string Decode accepts is the one Append writes for
// its number: random strings of the alphabet, and valid strings with a
// character dropped, added or changed. A valid string so changed never
// comes back as the original number. With a key, one with a character
// dropped or added comes back nil: a string shorter than L0 never
// decodes, and a longer one only for a number every string of length L0
// of which is blocked (none in 4 million, TestKeyedLength). The shares
// that decode are logged (docs/commands.md quotes them).
func TestCanonical(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Get(t), 0))
	for name, c := range codecs(t, rng) {
		randChar := func() byte { return c.alphabet[rng.IntN(len(c.alphabet))] }
		accepts := func(s []byte) (uint64, bool) {
			n, ok := c.Decode(s)
			if ok {
				if enc, err := c.Append(nil, n); err != nil || string(enc) != string(s) {
					t.Fatalf("%s: Decode(%q) = %d, which encodes as %q", name, s, n, enc)
				}
			}
			return n, ok
		}
		var valid int
		for range 20000 {
			s := make([]byte, 1+rng.IntN(25))
			for i := range s {
				s[i] = randChar()
			}
			if _, ok := accepts(s); ok {
				valid++
			}
		}
		var tried, dropped, added, changed int
		for _, n := range numbers(rng, 5000) {
			s, _ := c.Append(nil, n)
			i := rng.IntN(len(s))
			drop := slices.Delete(slices.Clone(s), i, i+1)
			add := slices.Insert(slices.Clone(s), rng.IntN(len(s)+1), randChar())
			change := slices.Clone(s)
			for change[i] == s[i] {
				change[i] = randChar()
			}
			tried++
			for _, m := range []struct {
				s     []byte
				count *int
			}{{drop, &dropped}, {add, &added}, {change, &changed}} {
				got, ok := accepts(m.s)
				if !ok {
					continue
				}
				*m.count++
				if got == n {
					t.Fatalf("%s: %q, from %q (%d), decodes as %d too", name, m.s, s, n, n)
				}
				if c.keyed != nil && len(m.s) != len(s) {
					t.Fatalf("%s: %q, %q (%d) with a character dropped or added, decodes as %d", name, m.s, s, n, got)
				}
			}
		}
		t.Logf("%s: %d of 20000 random strings valid; of %d valid strings with a character dropped %d decode, added %d, changed %d (to another number)",
			name, valid, tried, dropped, added, changed)
	}
}

// TestRank: with a key, the strings of 100,000 consecutive numbers show
// no order. Spearman's rank correlation between n and the rank of its
// string, and between the ranks of consecutive strings, is about normal
// with standard deviation 1/sqrt(N-1) (0.0032) for unrelated orders; the
// bound is 6 of those (a false alarm about once in 10^9 runs). Strings
// are ranked by their value in the alphabet (the order a reader who knows
// the alphabet can see) and by their bytes. Sqids mode, for contrast, is
// far from 0.
func TestRank(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Get(t), 0))
	const n = 100_000
	bound := 6 / math.Sqrt(n-1)
	for name, c := range codecs(t, rng) {
		first := rng.Uint64N(1 << 62)
		strs := make([]string, n)
		for i := range strs {
			s, _ := c.Append(nil, first+uint64(i))
			strs[i] = string(s)
		}
		byValue := func(a, b string) int {
			if r := cmp.Compare(len(a), len(b)); r != 0 {
				return r
			}
			for i := range len(a) {
				if r := cmp.Compare(c.pos[a[i]], c.pos[b[i]]); r != 0 {
					return r
				}
			}
			return 0
		}
		for order, compare := range map[string]func(a, b string) int{"alphabet": byValue, "bytes": strings.Compare} {
			rank := ranks(strs, compare)
			idx := make([]float64, n)
			for i := range idx {
				idx[i] = float64(i)
			}
			rhoN := spearman(idx, rank)
			rhoNext := spearman(rank[:n-1], rank[1:])
			t.Logf("%s, %s order: rho(n, rank) = %.5f, rho(rank, next rank) = %.5f (bound %.4f)", name, order, rhoN, rhoNext, bound)
			if c.keyed != nil && (math.Abs(rhoN) > bound || math.Abs(rhoNext) > bound) {
				t.Errorf("%s, %s order: the strings of consecutive numbers are ordered", name, order)
			}
		}
	}
}

// ranks are the ranks of strs in the order compare gives.
func ranks(strs []string, compare func(a, b string) int) []float64 {
	idx := make([]int, len(strs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return compare(strs[a], strs[b]) })
	r := make([]float64, len(strs))
	for rank, i := range idx {
		r[i] = float64(rank)
	}
	return r
}

// spearman is the Pearson correlation of two rank vectors.
func spearman(x, y []float64) float64 {
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx /= float64(len(x))
	my /= float64(len(y))
	var sxy, sxx, syy float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
		syy += (y[i] - my) * (y[i] - my)
	}
	return sxy / math.Sqrt(sxx*syy)
}

// defaultWords is the default blocklist filtered for DefaultAlphabet as
// sqids-go filters it (all of its words are lower-case letters and
// digits, at least 3 long).
var defaultWords = defaultBlocklist

// naiveBlocked is Sqids' blocklist check as sqids-go writes it: the
// reference for blocklist.match.
func naiveBlocked(id string) bool {
	id = strings.ToLower(id)
	for _, w := range defaultWords {
		switch {
		case len(w) > len(id):
		case len(id) <= 3 || len(w) <= 3:
			if id == w {
				return true
			}
		case strings.ContainsAny(w, "0123456789"):
			if strings.HasPrefix(id, w) || strings.HasSuffix(id, w) {
				return true
			}
		case strings.Contains(id, w):
			return true
		}
	}
	return false
}

// TestBlocklist: the index matches as Sqids' plain loop does, on random
// strings with words planted in them (and in upper case), and no public
// string of either mode spells a word.
func TestBlocklist(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Get(t), 0))
	b := newBlocklist(DefaultAlphabet, defaultBlocklist)
	var hits int
	for range 20000 {
		s := make([]byte, 1+rng.IntN(14))
		for i := range s {
			s[i] = DefaultAlphabet[rng.IntN(len(DefaultAlphabet))]
		}
		if rng.IntN(2) == 0 {
			w := defaultBlocklist[rng.IntN(len(defaultBlocklist))]
			if rng.IntN(2) == 0 {
				w = strings.ToUpper(w)
			}
			at := rng.IntN(len(s) + 1)
			s = append(s[:at], append([]byte(w), s[at:]...)...)
		}
		if len(s) > MaxLen {
			continue
		}
		got, want := b.match(s), naiveBlocked(string(s))
		if got != want {
			t.Fatalf("match(%q) = %v, Sqids' check %v", s, got, want)
		}
		if got {
			hits++
		}
	}
	t.Logf("%d of 20000 strings blocked", hits)

	for name, c := range codecs(t, rng) {
		for _, n := range numbers(rng, 30000) {
			s, _ := c.Append(nil, n)
			if naiveBlocked(string(s)) {
				t.Fatalf("%s: %d encodes as %q, which spells a blocklisted word", name, n, s)
			}
		}
	}
}

// TestKeyedLength measures how often a number below 2^63 needs more than
// L0 characters with a key and 62 letters (every variant of length 11
// blocked), and how often the first variant is blocked.
// PUBLICID_MEASURE=4000000 measures over more numbers.
func TestKeyedLength(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Get(t), 0))
	count := 200_000
	if n, err := strconv.Atoi(os.Getenv("PUBLICID_MEASURE")); err == nil {
		count = n
	}
	c, err := New(Settings{Key: []byte("0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	var longer, firstBlocked int
	buf := make([]byte, 0, MaxLen)
	for range count {
		n := rng.Uint64() & mask63
		s, _ := c.Append(buf[:0], n)
		if len(s) > 11 {
			longer++
		}
		// The first variant (slot 0) is v < 2^63: its first digit is
		// below 62^10's share, 2^63 / 62^10 = 10.99.
		if c.pos[s[0]] > 10 {
			firstBlocked++
		}
	}
	t.Logf("of %d random numbers below 2^63: %d took more than 11 characters, %d (%.4f%%) a variant past the first",
		count, longer, firstBlocked, 100*float64(firstBlocked)/float64(count))
}

func benchCodec(b *testing.B, key []byte) {
	c, err := New(Settings{Key: key})
	if err != nil {
		b.Fatal(err)
	}
	n := uint64(1234567890123456789)
	buf := make([]byte, 0, MaxLen)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = c.Append(buf[:0], n)
		}
	})
	s, _ := c.Append(nil, n)
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := c.Decode(s); !ok {
				b.Fatal("refused")
			}
		}
	})
}

func BenchmarkSqids(b *testing.B) { benchCodec(b, nil) }
func BenchmarkKeyed(b *testing.B) { benchCodec(b, []byte("0123456789abcdef")) }

// FuzzDecode: any string, in every configuration, decodes to nothing or
// to a number whose public string it is; never a panic, and never more
// than one string per number.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{"", "a", "86Rf07", "Uk", "zzzzzzzzzzz", "0000000000000000000", "abc\x00\xff", strings.Repeat("Z", MaxLen+1)} {
		f.Add(seed)
	}
	all := codecs(f, rand.New(rand.NewPCG(1, 2)))
	f.Fuzz(func(t *testing.T, s string) {
		for name, c := range all {
			n, ok := c.Decode([]byte(s))
			if !ok {
				continue
			}
			if enc, err := c.Append(nil, n); err != nil || string(enc) != s {
				t.Fatalf("%s: %q decodes to %d, whose string is %q (%v)", name, s, n, enc, err)
			}
		}
	})
}
