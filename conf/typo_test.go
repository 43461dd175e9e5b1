package conf

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agnivade/levenshtein"

	"github.com/idserver/idserver/internal/testseed"
)

// typo is key with one slip of a finger, chosen by rng: a letter left
// out, doubled or added, one for another, or two side by side swapped.
func typo(rng *rand.Rand, key string) string {
	const letters = "abcdefghijklmnopqrstuvwxyz-"
	letter := string(letters[rng.IntN(len(letters))])
	i := rng.IntN(len(key))
	switch rng.IntN(4) {
	case 0:
		return key[:i] + key[i+1:]
	case 1:
		return key[:i] + letter + key[i:]
	case 2:
		return key[:i] + letter + key[i+1:]
	}
	i = min(i, len(key)-2)
	return key[:i] + key[i+1:i+2] + key[i:i+1] + key[i+2:]
}

// typoSources are the three ways to name a key, each with the hint its
// error gives for a typo: the key it suggests, as the source writes it.
var typoSources = []struct {
	name string
	load func(t *testing.T, typo string) error
	hint *regexp.Regexp
}{
	{"file", func(t *testing.T, typo string) error {
		_, err := Load([]string{writeFile(t, "port 6553\n"+typo+" 1\n")}, nil)
		return err
	}, regexp.MustCompile(`\(did you mean '([a-z-]+)'\?\)$`)},
	{"flag", func(t *testing.T, typo string) error {
		_, err := Load([]string{"--" + typo, "1"}, nil)
		return err
	}, regexp.MustCompile(`\(did you mean --([a-z-]+)\?\)$`)},
	{"env", func(t *testing.T, typo string) error {
		_, err := Load(nil, []string{envName(typo) + "=1"})
		return err
	}, regexp.MustCompile(`; did you mean IDSERVER_([A-Z_]+)\?\)$`)},
}

// TestTypoSuggestsKey: a key mistyped by one slip (generated, for every
// key) in a config file, as a flag or as an environment variable, stops
// the start with an error that suggests the key, or one as near to what
// was typed.
func TestTypoSuggestsKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Get(t), 0))
	flags := []string{"config", "version", "check-ready", "help"}
	for _, key := range Keys() {
		for _, src := range typoSources {
			for range 3 {
				typed := typo(rng, key)
				if _, ok := lookup(typed); ok || slices.Contains(flags, typed) || strings.HasPrefix(typed, "-") {
					continue // not a typo, or not one a flag can be
				}
				checkHint(t, src.name, key, typed, src.load(t, typed), src.hint)
			}
		}
	}
}

// checkHint checks err, the error for typed, a typo of key in src,
// suggests key or a key as near to typed.
func checkHint(t *testing.T, src, key, typed string, err error, hint *regexp.Regexp) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: %q for %q: accepted", src, typed, key)
	}
	m := hint.FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("%s: %q for %q: %v, with no hint", src, typed, key, err)
	}
	got := strings.ToLower(strings.ReplaceAll(m[1], "_", "-"))
	if levenshtein.ComputeDistance(typed, got) > levenshtein.ComputeDistance(typed, key) {
		t.Errorf("%s: %q for %q: %v; %q is further from what was typed", src, typed, key, err, got)
	}
}

// TestNoHintForFarNames: a name near no key gets no guess.
func TestNoHintForFarNames(t *testing.T) {
	for _, name := range []string{"save", "appendonly", "zzzz"} {
		if near := nearest(name, Keys()); near != "" {
			t.Errorf("nearest(%q) = %q, want none", name, near)
		}
	}
}
