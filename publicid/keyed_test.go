package publicid

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/capitalone/fpe/ff1"

	"github.com/idserver/idserver/internal/testseed"
)

// TestFF1 compares the keyed mode's FF1 with capitalone/fpe's, an
// independent implementation checked against NIST's samples, on 63-bit
// binary numeral strings, every key size and random tweaks.
func TestFF1(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Get(t), 0))
	for _, size := range []int{16, 24, 32} {
		key := make([]byte, size)
		for i := range key {
			key[i] = byte(rng.Uint32())
		}
		c, err := New(Settings{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		ref, err := ff1.NewCipher(2, tweakLen, key, nil)
		if err != nil {
			t.Fatal(err)
		}
		sc := new(scratch)
		for i := range 500 {
			x := rng.Uint64() & mask63
			switch i {
			case 0:
				x = 0
			case 1:
				x = mask63
			}
			tw := tweak(11+rng.IntN(3), uint64(rng.IntN(300)), uint64(rng.IntN(2)))
			in := fmt.Sprintf("%063b", x)
			want, err := ref.EncryptWithTweak(in, tw[:])
			if err != nil {
				t.Fatal(err)
			}
			y := c.keyed.encrypt(sc, &tw, x)
			if got := fmt.Sprintf("%063b", y); got != want {
				t.Fatalf("key %x tweak %x: FF1(%s) = %s, capitalone/fpe %s", key, tw, in, got, want)
			}
			if back := c.keyed.decrypt(sc, &tw, y); back != x {
				t.Fatalf("key %x tweak %x: decrypt(encrypt(%d)) = %d", key, tw, x, back)
			}
			w, _ := strconv.ParseUint(want, 2, 64)
			if d, _ := ref.DecryptWithTweak(want, tw[:]); d != in || w != y {
				t.Fatalf("capitalone/fpe decrypts %s to %s", want, d)
			}
		}
	}
}

func TestKeyedLengths(t *testing.T) {
	key := make([]byte, 16)
	for _, tt := range []struct {
		alphabet  string
		minLength int
		start     int
	}{
		{DefaultAlphabet, 0, 11},
		{DefaultAlphabet, 11, 11},
		{DefaultAlphabet, 14, 14},
		{"0123456789abcdef", 0, 17},
		{"0123456789abcdefghijklmnopqrstuvwxyz", 0, 13},
	} {
		c, err := New(Settings{Alphabet: tt.alphabet, MinLength: tt.minLength, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		if c.keyed.start != tt.start {
			t.Errorf("%q min %d: starts at %d, want %d", tt.alphabet, tt.minLength, c.keyed.start, tt.start)
		}
		// L0 is the smallest length with floor(r^L / 2^63) >= 4.
		if s := c.keyed.slots[tt.start]; s < 4 || tt.minLength == 0 && c.keyed.slots[tt.start-1] >= 4 {
			t.Errorf("%q: %d slots at %d, %d below", tt.alphabet, s, tt.start, c.keyed.slots[tt.start-1])
		}
	}
}

// TestKeyedBlockedFirstVariant: a number whose first keyed variant spells
// a blocklisted word is written with its second, and the first, though
// it decodes to the number, is no public string (Decode checks the first
// variant by the blocklist alone, without encrypting again).
func TestKeyedBlockedFirstVariant(t *testing.T) {
	c, err := New(Settings{Key: []byte("0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	k, sc := c.keyed, new(scratch)
	for n := range uint64(1_000_000) {
		tw := tweak(k.start, 0, 0)
		first := c.appendValue(nil, k.start, 0, k.encrypt(sc, &tw, n))
		if !c.blocked.match(first) {
			continue
		}
		if m, ok := c.Decode(first); ok {
			t.Fatalf("%d's blocked first variant %q decodes to %d", n, first, m)
		}
		if enc, err := c.Append(nil, n); err != nil || string(enc) == string(first) {
			t.Fatalf("%d written as %q (%v), its blocked first variant", n, enc, err)
		}
		return
	}
	t.Fatal("no number below 1,000,000 has a blocked first variant")
}
