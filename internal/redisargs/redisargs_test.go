package redisargs

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestSplit covers what respserver's TestRawLikeRedis cannot ask
// redis-server (a NUL byte, which Redis never finds the end of a line
// past), and that a long line of spaces and quotes costs one buffer.
func TestSplit(t *testing.T) {
	tests := []struct {
		line string
		want []string
		err  error
	}{
		{"ECHO a\x00b c", []string{"ECHO", "a"}, nil},
		{"\x00ECHO", nil, nil},
		{`ECHO "a` + "\x00" + `b"`, nil, ErrUnbalancedQuotes},
		{`ECHO "a"` + "\x00b", []string{"ECHO", "a"}, nil},
		{"a\v\fb  c\t\td", []string{"a\v\fb", "c", "d"}, nil},
		{`"\x41\x4" '\'' '\n'`, []string{"Ax4", "'", `\n`}, nil},
	}
	for _, tt := range tests {
		args, _, err := Split([]byte(tt.line), nil, nil)
		var got []string
		for _, a := range args {
			got = append(got, string(a))
		}
		if !errors.Is(err, tt.err) || err == nil && !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: %q, %v; want %q, %v", tt.line, got, err, tt.want, tt.err)
		}
	}
	line := []byte(strings.Repeat(`"a b" `, 10<<10))
	var buf []byte
	args, buf, err := Split(line, buf, nil)
	if err != nil || len(args) != 10<<10 || cap(buf) != len(line) {
		t.Fatalf("%d args, buffer of %d for a line of %d: %v", len(args), cap(buf), len(line), err)
	}
	if n := testing.AllocsPerRun(10, func() { args, buf, _ = Split(line, buf, args[:0]) }); n != 0 {
		t.Fatalf("%v allocations splitting again into the same buffers", n)
	}
}
