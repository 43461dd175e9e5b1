package conf

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// ReadFile reads a redis.conf-style file: `key value` lines, # comments,
// keys in any case, values quoted as redis.conf quotes them; the last line
// for a key wins. The C original's line
// `id-generator server-id 0 id-range 2 shard-range 9 random-range 10` sets
// those keys. An unknown key or a malformed line is an error naming the
// file and line, as redis-server refuses to start on a bad directive.
func ReadFile(name string) (map[string]string, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	values, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", name, err)
	}
	return values, nil
}

// idGeneratorKeys are the keys the C original's id-generator line may set.
var idGeneratorKeys = map[string]bool{"server-id": true, "id-range": true, "shard-range": true, "random-range": true}

// Parse reads redis.conf-style lines from r; see ReadFile.
func Parse(r io.Reader) (map[string]string, error) {
	values := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		args, err := splitArgs(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		key := strings.ToLower(args[0])
		switch {
		case key == "id-generator":
			if len(args)%2 != 1 || len(args) == 1 {
				return nil, fmt.Errorf("line %d: id-generator takes key value pairs (server-id, id-range, shard-range, random-range)", n)
			}
			for i := 1; i < len(args); i += 2 {
				k := strings.ToLower(args[i])
				if !idGeneratorKeys[k] {
					return nil, fmt.Errorf("line %d: id-generator: unknown key %q", n, args[i])
				}
				values[k] = args[i+1]
			}
		default:
			f, ok := lookup(key)
			switch {
			case !ok:
				return nil, fmt.Errorf("line %d: unknown key %q", n, args[0])
			case f.text && len(args) >= 2:
				values[key] = strings.Join(args[1:], " ") // the type reads the words
			case len(args) != 2:
				return nil, fmt.Errorf("line %d: %s takes exactly one value, got %d", n, key, len(args)-1)
			default:
				values[key] = args[1]
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return values, nil
}

// splitArgs splits a line into words as redis.conf does: spaces separate,
// "double quotes" take \n \r \t \\ \" and \xHH escapes, 'single quotes'
// take \', and a closing quote must end the word.
func splitArgs(line string) ([]string, error) {
	var args []string
	for i := 0; ; {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i == len(line) {
			return args, nil
		}
		var w strings.Builder
		switch q := line[i]; q {
		case '"', '\'':
			i++
			closed := false
			for i < len(line) && !closed {
				c := line[i]
				switch {
				case c == '\\' && q == '"' && i+3 < len(line) && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]):
					b, _ := strconv.ParseUint(line[i+2:i+4], 16, 8)
					w.WriteByte(byte(b))
					i += 4
				case c == '\\' && i+1 < len(line) && (q == '"' || line[i+1] == '\''):
					w.WriteByte(unescape(line[i+1], q))
					i += 2
				case c == q:
					closed = true
					i++
				default:
					w.WriteByte(c)
					i++
				}
			}
			if !closed {
				return nil, errors.New("unbalanced quotes")
			}
			if i < len(line) && line[i] != ' ' && line[i] != '\t' {
				return nil, errors.New("closing quote must be followed by a space")
			}
		default:
			for i < len(line) && line[i] != ' ' && line[i] != '\t' {
				w.WriteByte(line[i])
				i++
			}
		}
		args = append(args, w.String())
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unescape(c, quote byte) byte {
	if quote == '"' {
		switch c {
		case 'n':
			return '\n'
		case 'r':
			return '\r'
		case 't':
			return '\t'
		case 'b':
			return '\b'
		case 'a':
			return '\a'
		}
	}
	return c
}
