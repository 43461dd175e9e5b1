package conf

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/idserver/idserver/internal/redisargs"
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
		if len(args) == 0 { // a line that starts with a NUL: Redis skips it (argc 0)
			continue
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
				return nil, fmt.Errorf("line %d: unknown key %q%s", n, args[0], keyHint(key))
			case f.words() && len(args) >= 2:
				values[key] = strings.Join(args[1:], " ") // the type reads the words
			case f.words():
				return nil, fmt.Errorf("line %d: %s takes one or more values, got none", n, key)
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

// splitArgs splits a line into words as Redis reads redis.conf (and an
// inline command): see redisargs.
func splitArgs(line string) ([]string, error) {
	args, _, err := redisargs.Split([]byte(line), nil, nil)
	if err != nil {
		return nil, err
	}
	words := make([]string, len(args))
	for i, a := range args {
		words[i] = string(a)
	}
	return words, nil
}
