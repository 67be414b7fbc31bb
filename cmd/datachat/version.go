package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"datachat/internal/duckdb"
)

// runVersion is `datachat version` (and `datachat --version`): the module
// version and the commit the binary was built from, as the Go toolchain
// stamped them, and the Go and DuckDB versions inside it.
func (m *Main) runVersion() error {
	version, commit := "(devel)", "unknown (built without version control information)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" {
			version = v
		}
		var rev, at string
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if rev != "" {
			parts := []string{rev}
			if at != "" {
				parts = append(parts, at)
			}
			if modified {
				parts = append(parts, "with uncommitted changes")
			}
			commit = strings.Join(parts, ", ")
		}
	}
	_, err := fmt.Fprintf(m.Stdout, "datachat %s\ncommit %s\ngo %s %s/%s\nduckdb %s\n",
		version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH, duckdb.Version())
	return err
}
