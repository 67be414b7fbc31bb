package worker

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/duckdb/duckdb-go/v2/mapping"

	"datachat"
	"datachat/internal/duckdb/wire"
)

// An upload is checked and converted to Parquet in a worker of its own,
// started ahead (duckdb.Engine keeps a pool for uploads) and ended after it: hostile bytes (a CSV header that is SQL,
// a decompression bomb, a Parquet footer that lies) meet DuckDB and the Go
// decoders there, under the worker's memory and CPU limits, with file access
// to the job's directory only, and a deadline after which the server kills it.
//
// Only our own SQL runs on the ingest DuckDB, each statement checked to be
// exactly one; every identifier and literal in it is quoted by QuoteIdent and
// QuoteLiteral. DuckDB's sniffer is asked for the dialect and column types,
// and our read_csv call is built from those fields, never from the SQL text
// the sniffer suggests.
// The files of an ingest job, in its directory. Their names are distinctive
// so that a DuckDB message naming one can be given the user's file name.
// (The upload itself is named by the server: duckdb.IngestInput.)
const (
	fileDecompressed = "dc-decompressed"
	fileUTF8         = "dc-utf8.csv"
	fileOutput       = "dc-output.parquet"
	fileRewritten    = "dc-rewritten.parquet"
)

// serveIngest is an ingest worker's life: one job, one reply, and progress
// frames while it runs.
func serveIngest(w *bufio.Writer, d *wire.Dec) int {
	var job wire.Ingest
	job.Decode(d)
	if d.Err() != nil || job.Every <= 0 || job.MaxLine <= 0 {
		reply(w, wire.ErrMalformed, nil)
		return 2
	}
	if _, err := applyLimits(job.Limits, job.Dir, nil); err != nil {
		reply(w, err, nil)
		return 1
	}
	prog := &ingestProgress{dir: job.Dir, input: job.Input}
	stop := prog.report(w, max(job.Every, time.Millisecond))
	res, err := ingest(context.Background(), job, prog)
	stop()
	err = hideErrorPaths(err, job.Dir, nil)
	reply(w, err, func(e *wire.Enc) error {
		res.Encode(e)
		return nil
	})
	return 0
}

// ingestThreads is how many DuckDB threads an upload's conversion gets: one
// for a small file that is not compressed (the second thread only adds the
// cost of waking it), else threads.
func ingestThreads(path string, size int64, threads int) int {
	if size >= 32<<20 {
		return threads
	}
	head, err := readHead(path, 4)
	if err != nil {
		return threads
	}
	for _, magic := range [][]byte{{0x1f, 0x8b}, {0x28, 0xb5, 0x2f, 0xfd}, []byte("BZh"), []byte("PK\x03\x04"), oleMagic[:4]} {
		if bytes.HasPrefix(head, magic) {
			return threads // it may unpack to far more than it is
		}
	}
	return 1
}

// ingest runs inside the worker, in the job's directory.
func ingest(ctx context.Context, job wire.Ingest, prog *ingestProgress) (*wire.IngestResult, error) {
	if err := os.Chdir(job.Dir); err != nil {
		return nil, fmt.Errorf("enter job directory: %w", err)
	}
	name := job.Name
	fi, err := os.Stat(job.Input)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	threads := ingestThreads(job.Input, fi.Size(), job.Threads)
	prog.set(wire.PhaseDecompressing)
	in, err := decompress(ctx, job.Input, ".", name, job.MaxBytes, job.MaxLine)
	if err != nil {
		return nil, err
	}
	kind, err := sniffKind(in, name)
	if err != nil {
		return nil, err
	}
	prog.reading(in)
	db, err := openDatabase("", [][2]string{
		{"threads", strconv.Itoa(threads)},
		{"memory_limit", memSetting(job.MemoryLimit)},
		{"temp_directory", "spill"},
	})
	if err != nil {
		return nil, err
	}
	defer mapping.Close(&db)
	res := &wire.IngestResult{}
	err = withConn(ctx, db, func(conn mapping.Connection) error {
		// DuckDB's progress, for the report (ingestProgress), never printed;
		// set before the sandbox locks the configuration.
		for _, q := range []string{"SET enable_progress_bar = true", "SET enable_progress_bar_print = false"} {
			if err := execOne(conn, q); err != nil {
				return fmt.Errorf("sandbox setup %q: %w", q, err)
			}
		}
		// The same sandbox as a query's: only this job's directory.
		if err := lockDown(conn); err != nil {
			return err
		}
		s := &ingestSession{conn: conn, name: name, input: job.Input, maxLine: job.MaxLine, memoryLimit: job.MemoryLimit}
		prog.converting(conn)
		defer prog.closing()
		var tables []wire.IngestTable
		switch kind {
		case "parquet":
			res.SourceFormat = "parquet"
			notes, err := s.storeParquet(in, fileOutput)
			if err != nil {
				return err
			}
			tables = []wire.IngestTable{{Output: fileOutput, Notes: notes}}
		case "xlsx":
			res.SourceFormat = "xlsx"
			if tables, err = s.storeWorkbook(in); err != nil {
				return err
			}
		case "json":
			res.SourceFormat = "json"
			if tables, err = s.storeJSON(in); err != nil {
				return err
			}
		default:
			enc, delim, notes, err := s.storeCSV(ctx, in, fileOutput)
			if err != nil {
				return err
			}
			res.SourceFormat, res.Encoding = "csv", enc
			if delim == "\t" || delim == `\t` {
				res.SourceFormat = "tsv"
			}
			tables = []wire.IngestTable{{Output: fileOutput, Notes: notes}}
		}
		prog.set(wire.PhaseDescribing)
		for i := range tables {
			if tables[i].Columns, tables[i].RowCount, err = s.describe(tables[i].Output); err != nil {
				return datachat.Errorf(datachat.EINVALID, "%s: the stored Parquet file cannot be read back: %s", name, s.message(err))
			}
		}
		res.Tables = tables
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// ingestSession is one job's DuckDB connection.
type ingestSession struct {
	conn        mapping.Connection
	name        string // the user's name for the file
	input       string // the uploaded file's name in the job's directory
	maxLine     int
	memoryLimit int64
}

// message is DuckDB's error message, first paragraph only, with the job's
// file names replaced by the name the user knows.
func (s *ingestSession) message(err error) string {
	msg := err.Error()
	msg, _, _ = strings.Cut(msg, "\n\n")
	msg, _, _ = strings.Cut(msg, "\nLINE ")
	msg = strings.TrimSpace(msg)
	for _, f := range []string{s.input, fileDecompressed, fileUTF8, fileOutput, fileRewritten} {
		msg = strings.ReplaceAll(msg, f, s.name)
	}
	return msg
}

func isOOM(err error) bool {
	var de *duckError
	return errors.As(err, &de) && de.typ == mapping.ErrorTypeOutOfMemory
}

func isInvalidUnicode(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Invalid unicode")
}

// columns returns the columns of a query as DuckDB's DESCRIBE names them.
func (s *ingestSession) columns(query string) ([]datachat.Column, error) {
	r, err := queryAll(s.conn, "SELECT column_name, column_type FROM (DESCRIBE "+query+")", -1, nil)
	if err != nil {
		return nil, err
	}
	cols := make([]datachat.Column, len(r.Rows))
	for i, row := range r.Rows {
		cols[i].Name, _ = row[0].(string)
		cols[i].SQLType, _ = row[1].(string)
		cols[i].Type = wire.FriendlyType(cols[i].SQLType)
	}
	return cols, nil
}

// describe returns the stored file's columns, with a few sample values, and
// its row count.
func (s *ingestSession) describe(path string) ([]datachat.Column, int64, error) {
	src := "read_parquet(" + datachat.QuoteLiteral(path) + ")"
	cols, err := s.columns("SELECT * FROM " + src)
	if err != nil {
		return nil, 0, err
	}
	r, err := queryAll(s.conn, "SELECT count(*) FROM "+src, 1, nil)
	if err != nil {
		return nil, 0, err
	}
	n, _ := r.Rows[0][0].(int64)
	s.samples(src, cols)
	return cols, n, nil
}

const (
	maxSamples    = 3
	maxSampleChar = 40
)

// samples sets a few distinct values of each scalar column, from the first
// rows, for the model's prompt. It is best effort: on any error (a column too
// big to read within the memory limit) columns keep no samples.
func (s *ingestSession) samples(src string, cols []datachat.Column) {
	var exprs []string
	var idx []int
	for i, c := range cols {
		switch c.Type {
		case datachat.TypeBlob, datachat.TypeList, datachat.TypeStruct, datachat.TypeMap:
			continue
		}
		exprs = append(exprs, fmt.Sprintf("list_filter(list(DISTINCT left(%s::VARCHAR, %d)), x -> x IS NOT NULL)[1:%d]::VARCHAR[]", datachat.QuoteIdent(c.Name), maxSampleChar+1, maxSamples))
		idx = append(idx, i)
	}
	if len(exprs) == 0 {
		return
	}
	r, err := queryAll(s.conn, fmt.Sprintf("SELECT %s FROM (SELECT * FROM %s LIMIT 2000)", strings.Join(exprs, ", "), src), 1, nil)
	if err != nil || len(r.Rows) != 1 {
		return
	}
	for k, v := range r.Rows[0] {
		list, _ := v.([]any)
		var out []string
		for _, x := range list {
			str, ok := x.(string)
			if !ok {
				continue
			}
			if utf8.RuneCountInString(str) > maxSampleChar {
				str = string([]rune(str)[:maxSampleChar]) + "…"
			}
			out = append(out, str)
		}
		cols[idx[k]].Samples = out
	}
}
