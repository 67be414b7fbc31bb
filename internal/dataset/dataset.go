// Package dataset takes datasets in, from an upload or a URL, and stores each as
// a Parquet file with its schema. Bytes are streamed to disk (URLs fetched with
// internal addresses refused at dial time), then checked and converted by the
// SQL engine in a worker process of its own ([duckdb.Engine.Ingest]):
// Parquet files are validated (every page decoded, page checksums verified)
// and kept, CSV/TSV files (any common text encoding, gzip/zstd/bzip2-compressed
// or not) are read with DuckDB's sniffer and written as Parquet.
package dataset

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"datachat"
	"datachat/internal/duckdb"
)

// Options configure a [Loader]. Zero values take the defaults shown.
type Options struct {
	Dir string // where stored datasets go (required)
	// TempDir is where uploads are spooled and converted, each in a work
	// directory removed when it is done: Dir/.tmp by default. It must be on
	// Dir's file system (stored files are moved, not copied, into Dir).
	// serve gives each process one of its own there (internal/scratch), so
	// that what a killed process left can be told from what a live one
	// writes.
	TempDir  string
	MaxBytes int64 // largest download or upload, and largest decompressed CSV ×4; 2 GiB
	// AllowPrivate allows URLs on any address; AllowNets allows only these
	// networks besides public addresses (tests: 127.0.0.1/32). See
	// config.ParseAllowPrivate, which reads DATACHAT_ALLOW_PRIVATE_URLS.
	AllowPrivate   bool
	AllowNets      []netip.Prefix
	ConnectTimeout time.Duration // TCP connect and TLS handshake; 10s
	HeaderTimeout  time.Duration // until the response headers, and the longest silence while downloading; 30s
	FetchTimeout   time.Duration // a whole download; 10m
	// Resolver looks up host names (nil: the system's); tests set one
	// answering on loopback.
	Resolver *net.Resolver
	// Engine checks and converts what was spooled, in its worker processes
	// (required).
	Engine *duckdb.Engine
}

// MaxNameLength is the longest file name kept as a dataset's source, in
// characters; a longer one is cut.
const MaxNameLength = 255

// Loader ingests datasets. It is safe for concurrent use.
type Loader struct {
	opts   Options
	tmpDir string
	client *http.Client
}

// Stored is a dataset written to the dataset directory: one table of an
// upload (a JSON object's arrays of records give one each).
type Stored struct {
	Path         string            // the Parquet file, relative to Options.Dir
	Name         string            // table name from the file name (TableName with nothing taken)
	Part         string            // "" for a file's one table; else the part of the file it holds (a JSON key)
	Source       string            // the file name or the URL
	SourceFormat string            // what came in: "parquet", "csv", "tsv" or "json" (the stored form is always Parquet)
	Encoding     string            // a CSV's text encoding, when it was not UTF-8 (transcoded)
	Columns      []datachat.Column // with friendly types and a few sample values
	RowCount     int64
	Bytes        int64    // size of the stored Parquet file
	Notes        []string // how it was read, when that matters (a sheet's skipped rows)
}

// New returns a Loader storing datasets in opts.Dir (created if needed).
func New(opts Options) (*Loader, error) {
	if opts.Dir == "" {
		return nil, errors.New("dataset: Options.Dir is required")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	opts.Dir = dir
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 2 << 30
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 10 * time.Second
	}
	if opts.HeaderTimeout <= 0 {
		opts.HeaderTimeout = 30 * time.Second
	}
	if opts.FetchTimeout <= 0 {
		opts.FetchTimeout = 10 * time.Minute
	}
	if opts.Engine == nil {
		return nil, errors.New("dataset: Options.Engine is required")
	}
	tmp := opts.TempDir
	if tmp == "" {
		tmp = filepath.Join(dir, ".tmp")
	}
	l := &Loader{opts: opts, tmpDir: tmp}
	if err := os.MkdirAll(l.tmpDir, 0o700); err != nil {
		return nil, fmt.Errorf("create dataset directory: %w", err)
	}
	l.client = l.newClient()
	return l, nil
}

// Dir returns the absolute dataset directory; a Stored.Path is relative to it.
func (l *Loader) Dir() string { return l.opts.Dir }

// Ingest stores the datasets read from r (an upload), named filename: one
// table, or one per array of records of a JSON object. r is streamed to disk,
// never held in memory; past MaxBytes the upload fails.
//
// Errors: EINVALID naming the file and what is wrong (too large, not Parquet,
// CSV or JSON, unreadable); nothing is left behind on error.
func (l *Loader) Ingest(ctx context.Context, r io.Reader, filename string) ([]*Stored, error) {
	name := cleanName(filename)
	tmp, err := l.spool(duckdb.ContextReader(ctx, r), name)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	defer os.Remove(tmp)
	return l.store(ctx, tmp, name, name)
}

// RemoveAll deletes the stored files of datasets, for an upload that could
// not be recorded.
func (l *Loader) RemoveAll(sts []*Stored) {
	for _, st := range sts {
		l.Remove(st.Path)
	}
}

// Remove deletes a stored dataset file, given its Stored.Path.
func (l *Loader) Remove(rel string) error {
	p := filepath.Join(l.opts.Dir, filepath.Clean("/"+rel))
	if filepath.Dir(p) != l.opts.Dir {
		return fmt.Errorf("remove dataset: %q is not a stored dataset", rel)
	}
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove dataset: %w", err)
	}
	return nil
}

// cleanName is the last element of a file name, at most MaxNameLength
// characters, "upload" when nothing is left.
func cleanName(filename string) string {
	name := filepath.Base(strings.ReplaceAll(filename, `\`, "/"))
	if name == "." || name == "/" || name == "" {
		return "upload"
	}
	if r := []rune(name); len(r) > MaxNameLength {
		name = string(r[:MaxNameLength-1]) + "…"
	}
	return name
}

func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// store turns the spooled file tmp into stored Parquet datasets: the engine
// checks and converts it in a worker of its own, in a work directory that
// holds nothing else.
func (l *Loader) store(ctx context.Context, tmp, name, source string) (_ []*Stored, err error) {
	id := newID()
	work := filepath.Join(l.tmpDir, id)
	if err := os.MkdirAll(work, 0o700); err != nil {
		return nil, datachat.ClassifyNoSpace(fmt.Errorf("create work directory: %w", err))
	}
	defer os.RemoveAll(work)
	if err := os.Rename(tmp, filepath.Join(work, duckdb.IngestInput)); err != nil {
		return nil, fmt.Errorf("move upload: %w", err)
	}
	res, err := l.opts.Engine.Ingest(ctx, duckdb.IngestJob{
		Dir: work, Input: duckdb.IngestInput, Name: name, MaxBytes: 4 * l.opts.MaxBytes,
	})
	if err != nil {
		return nil, err
	}
	var out []*Stored
	defer func() {
		if err != nil {
			l.RemoveAll(out)
		}
	}()
	for i, t := range res.Tables {
		rel := id + ".parquet"
		if len(res.Tables) > 1 {
			rel = fmt.Sprintf("%s-%d.parquet", id, i+1)
		}
		final := filepath.Join(l.opts.Dir, rel)
		if err := os.Rename(filepath.Join(work, t.Output), final); err != nil {
			return nil, fmt.Errorf("store dataset: %w", err)
		}
		st := &Stored{
			Path: rel, Name: datachat.TableName(name, nil), Part: t.Suffix, Source: source,
			SourceFormat: res.SourceFormat, Encoding: res.Encoding,
			Columns: t.Columns, RowCount: t.RowCount, Notes: t.Notes,
		}
		out = append(out, st)
		fi, err := os.Stat(final)
		if err != nil {
			return nil, fmt.Errorf("store dataset: %w", err)
		}
		st.Bytes = fi.Size()
		if t.Suffix != "" {
			st.Name = datachat.TableName(strings.TrimSuffix(name, filepath.Ext(name))+"_"+t.Suffix, nil)
		}
	}
	return out, nil
}

// FormatDatabase is the SourceFormat of a table saved from a query on a
// database source (execute_sql's save_as).
const FormatDatabase = "database"

// Save stores rows as a dataset: fill writes them, as they arrive, to a
// spool in a work directory of their own (at most MaxBytes of them), and
// the engine stores them as Parquet in a worker ([duckdb.Engine.Save]).
// name is the table's, source what the dataset says it came from.
//
// Errors: fill's, as is; EINVALID when the rows pass MaxBytes or cannot be
// stored; EBUSY on a full disk. Nothing is left behind on error.
func (l *Loader) Save(ctx context.Context, name, source string, fill func(sink datachat.RowSink) error) (_ *Stored, err error) {
	id := newID()
	work := filepath.Join(l.tmpDir, id)
	if err := os.MkdirAll(work, 0o700); err != nil {
		return nil, datachat.ClassifyNoSpace(fmt.Errorf("create work directory: %w", err))
	}
	defer os.RemoveAll(work)
	const spool = "dc-spool"
	f, err := os.OpenFile(filepath.Join(work, spool), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, datachat.ClassifyNoSpace(fmt.Errorf("create spool: %w", err))
	}
	sp := duckdb.NewSpool(f, l.opts.MaxBytes)
	err = fill(sp)
	if err == nil {
		err = sp.Flush()
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = datachat.ClassifyNoSpace(cerr)
	}
	if err != nil {
		return nil, err
	}
	t, err := l.opts.Engine.Save(ctx, duckdb.SaveJob{Dir: work, Spool: spool, Name: name, Columns: sp.SaveColumns()})
	if err != nil {
		return nil, err
	}
	rel := id + ".parquet"
	final := filepath.Join(l.opts.Dir, rel)
	if err := os.Rename(filepath.Join(work, t.Output), final); err != nil {
		return nil, fmt.Errorf("store dataset: %w", err)
	}
	fi, err := os.Stat(final)
	if err != nil {
		os.Remove(final)
		return nil, fmt.Errorf("store dataset: %w", err)
	}
	return &Stored{
		Path: rel, Name: name, Source: source, SourceFormat: FormatDatabase,
		Columns: t.Columns, RowCount: t.RowCount, Bytes: fi.Size(), Notes: t.Notes,
	}, nil
}
