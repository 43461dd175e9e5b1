package publicid

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sqids/sqids-go"

	"github.com/idserver/idserver/internal/testseed"
)

// Sqids' own test vectors (sqids-go v0.4.1, from sqids-spec) that encode
// a single number: a Codec does only that.
func TestSqidsVectors(t *testing.T) {
	tests := []struct {
		name      string
		alphabet  string
		minLength int
		blocklist []string // nil: none; default: defaultBlocklist
		n         uint64
		id        string
	}{
		// encoding_test.go: TestEncodingIncrementalNumbers
		{"incremental", "", 0, defaultBlocklist, 0, "bM"},
		{"incremental", "", 0, defaultBlocklist, 1, "Uk"},
		{"incremental", "", 0, defaultBlocklist, 2, "gb"},
		{"incremental", "", 0, defaultBlocklist, 3, "Ef"},
		{"incremental", "", 0, defaultBlocklist, 4, "Vq"},
		{"incremental", "", 0, defaultBlocklist, 5, "uw"},
		{"incremental", "", 0, defaultBlocklist, 6, "OI"},
		{"incremental", "", 0, defaultBlocklist, 7, "AX"},
		{"incremental", "", 0, defaultBlocklist, 8, "p6"},
		{"incremental", "", 0, defaultBlocklist, 9, "nJ"},
		// blocklist_test.go: TestBlocklistDefault, Empty, NonEmpty
		{"blocklist default", "", 0, defaultBlocklist, 4572721, "JExTR"},
		{"blocklist empty", "", 0, nil, 4572721, "aho1e"},
		{"blocklist non-empty", "", 0, []string{"ArUO"}, 4572721, "aho1e"},
		{"blocklist non-empty", "", 0, []string{"ArUO"}, 100_000, "QyG4"},
	}
	for _, tt := range tests {
		c, err := newCodec(Settings{Alphabet: tt.alphabet, MinLength: tt.minLength}, tt.blocklist)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Append(nil, tt.n)
		if err != nil || string(got) != tt.id {
			t.Errorf("%s: Append(%d) = %q, %v; want %q", tt.name, tt.n, got, err, tt.id)
		}
		if n, ok := c.Decode([]byte(tt.id)); !ok || n != tt.n {
			t.Errorf("%s: Decode(%q) = %d, %v; want %d", tt.name, tt.id, n, ok, tt.n)
		}
	}

	// TestBlocklistDefault: the blocked string is not canonical, so
	// Decode refuses what Sqids' decode reads as [4572721].
	c, _ := New(Settings{})
	if n, ok := c.Decode([]byte("aho1e")); ok {
		t.Errorf("Decode(aho1e) = %d, want refused (blocked, not canonical)", n)
	}

	// TestShortBlocklistMatch: 1000 round-trips with "pnd" blocked.
	c, _ = newCodec(Settings{}, []string{"pnd"})
	if id, err := c.Append(nil, 1000); err != nil {
		t.Error(err)
	} else if n, ok := c.Decode(id); !ok || n != 1000 {
		t.Errorf("pnd: Decode(%q) = %d, %v", id, n, ok)
	}

	// TestMaxEncodingAttempts: every string of 0 blocked.
	c, _ = newCodec(Settings{Alphabet: "abc", MinLength: 3}, []string{"cab", "abc", "bca"})
	if id, err := c.Append(nil, 0); err != ErrBlocked {
		t.Errorf("Append(0) = %q, %v; want ErrBlocked", id, err)
	}

	// alphabet_test.go and minlength_test.go: one-number round trips.
	for _, a := range []string{"0123456789abcdef", "abc", "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!@#$%^&*()-_+|{}[];:'\"/?.>,<`~"} {
		for _, ml := range []int{0, 1, 5, 10, 20} {
			c, err := New(Settings{Alphabet: a, MinLength: ml})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []uint64{0, 1, 3, 100, 1_000_000, math.MaxUint64} {
				id, err := c.Append(nil, n)
				if err != nil || len(id) < ml {
					t.Fatalf("%q min %d: Append(%d) = %q, %v", a, ml, n, id, err)
				}
				if got, ok := c.Decode(id); !ok || got != n {
					t.Errorf("%q min %d: Decode(%q) = %d, %v; want %d", a, ml, id, got, ok, n)
				}
			}
		}
	}
}

func TestAlphabetChecks(t *testing.T) {
	for _, tt := range []struct {
		alphabet string
		key      []byte
		err      string
	}{
		{"ë1092", nil, "printable ASCII"},
		{"aabcdefg", nil, "unique"},
		{"ab", nil, "at least 3"},
		{"a bc", nil, "printable ASCII"},
		{"0123456789abcde", make([]byte, 16), "at least 16"},
		{"", make([]byte, 15), "16, 24 or 32 bytes"},
	} {
		s := Settings{Alphabet: tt.alphabet, Key: tt.key}
		_, err := New(s)
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("New(%q, key of %d) = %v, want an error with %q", tt.alphabet, len(tt.key), err, tt.err)
		}
		if verr := s.Validate(); verr == nil || err == nil || verr.Error() != err.Error() {
			t.Errorf("%q, key of %d: Validate() = %v, New's error %v", tt.alphabet, len(tt.key), verr, err)
		}
	}
	if _, err := New(Settings{MinLength: MaxMinLength + 1}); err == nil {
		t.Errorf("New with min length %d: no error", MaxMinLength+1)
	}
	if err := (Settings{MinLength: MaxMinLength + 1}).Validate(); err == nil {
		t.Errorf("Validate with min length %d: no error", MaxMinLength+1)
	}
}

// TestSqidsGo compares the Codec with sqids-go, the Go reference, over
// edge numbers and random ones, several alphabets and minimum lengths.
func TestSqidsGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Get(t), 0))
	nums := []uint64{0, 1, 2, 61, 62, 63, 1<<63 - 1, 1 << 63, math.MaxUint64}
	for range 2000 {
		nums = append(nums, rng.Uint64()>>rng.UintN(64))
	}
	for _, a := range []string{DefaultAlphabet, "0123456789abcdef", "abc", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz-_0123456789"} {
		for _, ml := range []int{0, 1, 4, 11, 20} {
			ref, err := sqids.New(sqids.Options{Alphabet: a, MinLength: uint8(ml)})
			if err != nil {
				t.Fatal(err)
			}
			c, err := New(Settings{Alphabet: a, MinLength: ml})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range nums {
				want, werr := ref.Encode([]uint64{n})
				got, err := c.Append(nil, n)
				if string(got) != want || (err == nil) != (werr == nil) {
					t.Fatalf("%q min %d: Append(%d) = %q, %v; sqids-go %q, %v", a, ml, n, got, err, want, werr)
				}
				if err != nil {
					continue
				}
				if d := ref.Decode(want); len(d) != 1 || d[0] != n {
					t.Fatalf("sqids-go decodes %q as %v, want [%d]", want, d, n)
				}
			}
		}
	}
}
