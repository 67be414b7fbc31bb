package dataset

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"datachat"
	"datachat/internal/disktest"
	"datachat/internal/duckdb"
)

// randomCSV is a CSV of n rows that compresses badly: its Parquet form is
// large too.
func randomCSV(n int) []byte {
	var b bytes.Buffer
	b.WriteString("id,x,label\n")
	r := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		fmt.Fprintf(&b, "%d,%d,%x\n", i, r.Int64(), r.Uint64())
	}
	return b.Bytes()
}

// wantNoSpace checks err is the server's full disk, naming no path and not
// blaming the file.
func wantNoSpace(t *testing.T, what string, err error, dir string) {
	t.Helper()
	msg := datachat.ErrorMessage(err)
	switch {
	case err == nil:
		t.Fatalf("%s: got no error, want the disk full", what)
	case datachat.ErrorCode(err) != datachat.EBUSY || !errors.Is(err, datachat.ErrNoSpace):
		t.Errorf("%s: got %v (code %s), want the server's full disk", what, err, datachat.ErrorCode(err))
	case !strings.HasPrefix(msg, "The server is out of disk space"):
		t.Errorf("%s: message %q", what, msg)
	case strings.Contains(msg, dir) || strings.Contains(msg, "/") || strings.Contains(msg, "data.csv"):
		t.Errorf("%s: message %q names a path or blames the file", what, msg)
	}
}

// TestFullDisk: an upload on a full disk fails as the server's condition,
// whether the disk fills while the upload is spooled, while it is decompressed
// or while DuckDB writes its Parquet form; nothing is left behind, and once
// space is freed the same upload goes through.
func TestFullDisk(t *testing.T) {
	disk := disktest.Small(t, 24<<20)
	e, err := duckdb.New(duckdb.Options{TempDir: filepath.Join(disk, "tmp"), MemoryLimit: 256 << 20, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	l := mustLoader(t, Options{Dir: filepath.Join(disk, "datasets"), Engine: e})
	csv := randomCSV(40000) // about 1.5 MiB
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(csv)
	zw.Close()
	ctx := context.Background()

	for _, tc := range []struct {
		name  string
		file  string
		data  []byte
		leave int64 // bytes left free: what the spooled upload fits in
	}{
		{"while spooling", "data.csv", csv, 0},
		{"while DuckDB writes Parquet", "data.csv", csv, int64(len(csv)) + 64<<10},
		{"while decompressing", "data.csv.gz", gz.Bytes(), int64(gz.Len()) + 64<<10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			filler := disktest.Fill(t, disk, tc.leave)
			_, err := l.Ingest(ctx, bytes.NewReader(tc.data), tc.file)
			wantNoSpace(t, "upload on a full disk", err, disk)
			t.Logf("%v", err)
			mustBeClean(t, l)
			os.Remove(filler)
			sts, err := l.Ingest(ctx, bytes.NewReader(tc.data), tc.file)
			if err != nil || sts[0].RowCount != 40000 {
				t.Fatalf("upload once space is freed: %v", err)
			}
			l.RemoveAll(sts)
			mustBeClean(t, l)
		})
	}
}
