// Package buildinfo is idserver's version, and what --version prints: the
// version with the commit and Go version the binary was built from.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is idserver's version, shown in INFO, /metrics and --version.
const Version = "0.1.0"

// Line is what --version prints, from the binary's build info.
func Line() string {
	commit, goVersion := "unknown", runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		vcs := map[string]string{}
		for _, st := range bi.Settings {
			vcs[st.Key] = st.Value
		}
		if rev := vcs["vcs.revision"]; rev != "" {
			commit = rev
		}
		if vcs["vcs.modified"] == "true" {
			commit += "-dirty"
		}
		goVersion = bi.GoVersion
	}
	return fmt.Sprintf("idserver %s commit %s %s", Version, commit, goVersion)
}
