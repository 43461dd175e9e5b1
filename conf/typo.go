package conf

import (
	"errors"
	"fmt"

	"github.com/agnivade/levenshtein"
	"github.com/spf13/pflag"
)

// nearest is the one of names nearest to name by edit distance
// (Levenshtein's), the first of several as near, if it is near enough to
// be a typo of it: within two edits (prot for port, two letters swapped,
// is two), or a third of name's length for a long one. "" if none is.
func nearest(name string, names []string) string {
	best, bound := "", max(2, len(name)/3)
	for _, n := range names {
		if d := levenshtein.ComputeDistance(name, n); d <= bound {
			best, bound = n, d-1
		}
	}
	return best
}

// keyHint is the hint for name in a config file, which no key is:
// " (did you mean 'port'?)" with the nearest key, or "" if none is near.
func keyHint(name string) string {
	if key := nearest(name, Keys()); key != "" {
		return fmt.Sprintf(" (did you mean '%s'?)", key)
	}
	return ""
}

// unknownVariable is the error for the environment variable name, whose
// key no key is: it names the variable of the nearest key, or says where
// the keys are listed.
func unknownVariable(name, key string) error {
	if near := nearest(key, Keys()); near != "" {
		return fmt.Errorf("environment: unknown variable %s (no key %q; did you mean %s?)", name, key, envName(near))
	}
	return fmt.Errorf("environment: unknown variable %s (no key %q; idserver --help lists the keys)", name, key)
}

// flagHint is the hint for err, fs's error parsing the command line, if
// it names a long flag fs does not have: "did you mean --port?" for
// --prot, the nearest flag it has (keys, --config, --version ...).
func flagHint(fs *pflag.FlagSet, err error) string {
	var unknown *pflag.NotExistError
	if !errors.As(err, &unknown) || unknown.GetSpecifiedShortnames() != "" {
		return ""
	}
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	if n := nearest(unknown.GetSpecifiedName(), names); n != "" {
		return " (did you mean --" + n + "?)"
	}
	return ""
}
