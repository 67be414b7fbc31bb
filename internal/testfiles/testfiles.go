// Package testfiles builds the files tests upload and read — a
// penguins-shaped CSV, PDFs, Markdown, HTML, DOCX and UTF-16 text — in Go,
// the same bytes on every run. Tests that must run everywhere use these;
// real-world files stay in ../shared, read through [datachat/internal/sharedtest].
package testfiles

import (
	"os"
	"path/filepath"
	"testing"
)

// Write writes data to dir/name and returns the path.
func Write(tb testing.TB, dir, name string, data []byte) string {
	tb.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}
