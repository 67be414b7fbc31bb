package dataset

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"

	"datachat"
	"datachat/internal/duckdb"
)

// TestLongLineRefused: a CSV line longer than the engine's MaxLine is
// refused wherever its bytes enter — as the upload spools, as the worker
// decompresses it, as the worker transcodes it to UTF-8 (where a line of
// Windows-1252 text can grow past the limit) — with the same message, and
// a line within the limit loads.
func TestLongLineRefused(t *testing.T) {
	e, err := duckdb.New(duckdb.Options{TempDir: t.TempDir(), MemoryLimit: 256 << 20, Threads: 1, MaxLine: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	l := mustLoader(t, Options{Engine: e})
	long := "a,b\n1,2\n3," + strings.Repeat("x", 5000) + "\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(long))
	zw.Close()
	// 3,000 bytes of é in Windows-1252 (or kanji, read as Shift_JIS):
	// within the limit as they come, past it as UTF-8.
	legacy := "a,b\n1,2\n3," + strings.Repeat("\xe9", 3000) + "\n"
	for _, c := range []struct{ name, data string }{
		{"long.csv", long},
		{"long.csv.gz", gz.String()},
		{"legacy.csv", legacy},
	} {
		_, err := ingestBytes(t, l, c.name, []byte(c.data))
		want := c.name + " has a line longer than 4 KiB (line 3), the most a CSV line may hold here: is it really a CSV file, with line breaks?"
		if datachat.ErrorCode(err) != datachat.EINVALID || datachat.ErrorMessage(err) != want {
			t.Errorf("%s: got %v, want EINVALID %q", c.name, err, want)
		}
	}
	if _, err := ingestBytes(t, l, "fits.csv", []byte("a,b\n1,"+strings.Repeat("x", 2000)+"\n")); err != nil {
		t.Errorf("a line within the limit: %v", err)
	}
	mustBeClean(t, l)
}
