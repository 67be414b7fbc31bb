package worker

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unicode/utf8"

	"datachat"
	"datachat/internal/sharedtest"
)

// Fuzz targets for the decoders an ingest worker runs on uploaded bytes
// before DuckDB sees them. Run one with, e.g.:
// go test -run '^$' -fuzz '^FuzzPageChecksums$' -fuzztime 30s ./internal/duckdb

// within fails the test if fn takes longer than d: the fuzzer has no timeout
// of its own for one input, and a hang would only stall it.
func within(t *testing.T, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("still running after %s", d)
	}
}

// FuzzPageChecksums feeds arbitrary files to the Parquet footer and page
// header reader, which runs on every uploaded Parquet file before DuckDB.
func FuzzPageChecksums(f *testing.F) {
	for _, name := range []string{"alltypes_plain.parquet", "datapage_v1-corrupt-checksum.parquet", "large_string_map.brotli.parquet"} {
		if b := sharedtest.Seed(f, "data/parquet/"+name); b != nil {
			f.Add(b)
		}
	}
	f.Add([]byte("PAR1\x15\x00PAR1"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "f.parquet")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		within(t, 2*time.Second, func() { // must not panic, hang or allocate wildly
			_ = verifyPageChecksums(path)
			_, _ = parseFooter(data)
			_, _, _ = parsePageHeader(data)
		})
	})
}

// FuzzDetectEncoding checks the encoding guess and the transcoding to UTF-8
// that every CSV goes through.
func FuzzDetectEncoding(f *testing.F) {
	if b := sharedtest.Seed(f, "data/csv/test_mskanji.csv"); b != nil {
		f.Add(b)
	}
	f.Add([]byte("\xff\xfea\x00b\x00"))
	f.Add([]byte("\x00\x00\xfe\xff\x00\x00\x00a"))
	f.Add([]byte("caf\xe9,na\xefve\n"))
	f.Add([]byte("\xef\xbb\xbf<html>"))
	f.Add([]byte("a\x00b\x00c\x00"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		enc, err := detectEncoding(data, "f.csv")
		if err != nil {
			if datachat.ErrorCode(err) != datachat.EINVALID {
				t.Fatalf("detectEncoding: got %v, want EINVALID", err)
			}
			return
		}
		if enc.enc == nil {
			if !validUTF8Prefix(data) {
				t.Fatalf("detectEncoding took %q for UTF-8", data)
			}
			return
		}
		in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
		if err := os.WriteFile(in, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := transcode(context.Background(), in, out, enc.enc, 0, "f.csv"); err != nil {
			return // a decoder may refuse malformed input; that is an error, not a crash
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.Valid(b) {
			t.Fatalf("transcoding %q from %s gave invalid UTF-8 %q", data, enc.name, b)
		}
	})
}
