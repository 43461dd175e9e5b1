package respserver

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/idserver/idserver/idgen"
	"github.com/idserver/idserver/internal/testseed"
	"github.com/idserver/idserver/publicid"
)

// keyedCodec is a publicid codec with a fixed key, for the tests.
func keyedCodec(t testing.TB) *publicid.Codec {
	c, err := publicid.New(publicid.Settings{Key: []byte("0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPublicID: PUBLICID and PRIVATEID in both modes over edge and random
// numbers, one and several at a time: each string is the codec's, and
// comes back as its number (a bulk string of digits from 2^63 on); a
// string no number encodes is nil; bad numbers, arity and counts get
// Redis's errors.
func TestPublicID(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Get(t), 0))
	for name, codec := range map[string]*publicid.Codec{"sqids": nil, "keyed": keyedCodec(t)} {
		_, addr := startServer(t, idgen.Settings{MaxLead: time.Hour}, Options{PublicID: codec, MGetIDMax: 5})
		c := dialRaw(t, addr)
		if codec == nil {
			codec = defaultPublicID
		}
		nums := []uint64{0, 1, 1<<63 - 1, 1 << 63, math.MaxUint64}
		for range 200 {
			nums = append(nums, rng.Uint64()>>rng.UintN(64))
		}
		for _, n := range nums {
			want, _ := codec.Append(nil, n)
			digits := strconv.FormatUint(n, 10)
			if got := c.do("PUBLICID", digits); got != string(want) {
				t.Fatalf("%s: PUBLICID %d = %#v, want %q", name, n, got, want)
			}
			var back any = int64(n)
			if n > math.MaxInt64 {
				back = digits
			}
			if got := c.do("PRIVATEID", string(want)); got != back {
				t.Fatalf("%s: PRIVATEID %q = %#v, want %#v", name, want, got, back)
			}
		}
		a, _ := codec.Append(nil, 7)
		b, _ := codec.Append(nil, 1<<63)
		for _, tt := range []struct {
			args []string
			want any
		}{
			{[]string{"PUBLICID", "7", "9223372036854775808"}, []any{string(a), string(b)}},
			{[]string{"PRIVATEID", string(a), "*", string(b), string(a) + string(a[:1])}, []any{int64(7), nil, "9223372036854775808", nil}},
			{[]string{"PRIVATEID", ""}, nil},
			{[]string{"PUBLICID", "-1"}, respError("ERR value is not an integer or out of range")},
			{[]string{"PUBLICID", "7", "07"}, respError("ERR value is not an integer or out of range")},
			{[]string{"PUBLICID", "18446744073709551616"}, respError("ERR value is not an integer or out of range")},
			{[]string{"PUBLICID", "1x"}, respError("ERR value is not an integer or out of range")},
			{[]string{"PUBLICID"}, respError("ERR wrong number of arguments for 'publicid' command")},
			{[]string{"PRIVATEID"}, respError("ERR wrong number of arguments for 'privateid' command")},
			{[]string{"PUBLICID", "1", "2", "3", "4", "5", "6"}, respError("ERR PUBLICID takes at most 5 numbers at once (mgetid-max), not 6")},
			{[]string{"privateid", "a", "b", "c", "d", "e", "f"}, respError("ERR PRIVATEID takes at most 5 strings at once (mgetid-max), not 6")},
		} {
			got := c.do(tt.args...)
			if ga, ok := got.([]any); ok {
				wa, _ := tt.want.([]any)
				if len(ga) == len(wa) {
					same := true
					for i := range ga {
						same = same && ga[i] == wa[i]
					}
					if same {
						continue
					}
				}
			} else if got == tt.want {
				continue
			}
			t.Errorf("%s: %q = %#v, want %#v", name, tt.args, got, tt.want)
		}
		// In a transaction, queued and run as any command.
		c.do("MULTI")
		c.do("PUBLICID", "7")
		if got := c.do("EXEC"); len(got.([]any)) != 1 || got.([]any)[0] != string(a) {
			t.Errorf("%s: MULTI PUBLICID 7 EXEC = %#v", name, got)
		}
	}
}

// BenchmarkPublicID measures PUBLICID and PRIVATEID of one number through
// the command layer, beside GETID, in both modes: no allocation.
func BenchmarkPublicID(b *testing.B) {
	for _, mode := range []struct {
		name  string
		codec *publicid.Codec
	}{{"sqids", nil}, {"keyed", keyedCodec(b)}} {
		g, err := idgen.New(idgen.Settings{MaxLead: 24 * time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		s := New(Options{Generator: g, PublicID: mode.codec})
		str, _ := s.publicID.Append(nil, 1234567890123456789)
		for _, args := range [][]string{{"GETID"}, {"PUBLICID", "1234567890123456789"}, {"PRIVATEID", string(str)}} {
			b.Run(mode.name+"/"+args[0], func(b *testing.B) {
				p := testPipe(s)
				cmd := []byte(encode(args...))
				b.ReportAllocs()
				for b.Loop() {
					p.Send(cmd)
					p.Reset()
				}
			})
		}
	}
}
