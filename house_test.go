package datachat

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxFileLines is the most lines a file of production code may have: past
// it, a file holds more than one idea and is split by idea (issue 26).
const maxFileLines = 600

// TestFileLength fails naming every non-test Go file of the module over
// maxFileLines lines.
func TestFileLength(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path == "." {
				return nil
			}
			if strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "vendor" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n := bytes.Count(data, []byte("\n"))
		if len(data) > 0 && data[len(data)-1] != '\n' {
			n++
		}
		slash := filepath.ToSlash(path)
		if n > maxFileLines {
			t.Errorf("%s: got %d lines, want at most %d: split it by idea into files of the same package", slash, n, maxFileLines)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk the module: %v", err)
	}
}

// TestImportBoundaries: the packages that decide (the chat turn, the tools'
// catalog, MCP, the configuration) build on the root package and pure
// helpers, never on an implementation they are handed at run time (issue
// 26): `go list -deps` of each shows none of the packages it must not.
func TestImportBoundaries(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	impls := []string{"duckdb", "retrieval", "sqlite", "postgres", "gemini", "openai", "ollama", "dbsource", "workspace"}
	for pkg, forbidden := range map[string][]string{
		"./internal/chat":      impls,
		"./internal/tools":     impls,
		"./internal/mcpserver": {"duckdb", "sqlite", "postgres", "gemini", "openai", "ollama"},
		"./internal/config":    {"gemini", "openai", "ollama", "duckdb", "sqlite", "postgres"},
	} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		for _, f := range forbidden {
			// The package and those below it (duckdb/worker, duckdb/wire).
			impl := "datachat/internal/" + f
			if i := slices.IndexFunc(deps, func(d string) bool { return d == impl || strings.HasPrefix(d, impl+"/") }); i >= 0 {
				t.Errorf("%s builds on %s: it should reach it through an interface it declares", pkg, deps[i])
			}
		}
	}
}
