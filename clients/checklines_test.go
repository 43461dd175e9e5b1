package clients

import (
	"strings"
	"testing"
)

// reportChecks makes a subtest of each of checks from the output of a
// program that ran them, prog, whose lines say "ok NAME" or
// "FAIL NAME: why" (clients/python/check.py, clients/rust): one process
// per client, each check still passing or failing on its own. The first
// line names the library, and is logged. A check without a line fails, as
// does a program that failed (err) with every check passing.
func reportChecks(t *testing.T, prog string, checks []string, out string, err error) {
	t.Helper()
	t.Log(strings.SplitN(out, "\n", 2)[0])
	for _, check := range checks {
		t.Run(check, func(t *testing.T) {
			for line := range strings.Lines(out) {
				line = strings.TrimSpace(line)
				if line == "ok "+check {
					return
				}
				if why, ok := strings.CutPrefix(line, "FAIL "+check+": "); ok {
					t.Fatal(why)
				}
			}
			t.Fatalf("%s gave no result for %s: %v\n%s", prog, check, err, out)
		})
	}
	if err != nil && !t.Failed() {
		t.Errorf("%s: %v\n%s", prog, err, out)
	}
}
