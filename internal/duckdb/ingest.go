package duckdb

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/duckdb/duckdb-go/v2/mapping"

	"datachat"
	"datachat/internal/xlsx"
)

// An upload is checked and converted to Parquet in a worker of its own,
// started ahead (Engine.uploads) and ended after it: hostile bytes (a CSV header that is SQL,
// a decompression bomb, a Parquet footer that lies) meet DuckDB and the Go
// decoders there, under the worker's memory and CPU limits, with file access
// to the job's directory only, and a deadline after which the server kills it.
//
// Only our own SQL runs on the ingest DuckDB, each statement checked to be
// exactly one; every identifier and literal in it is quoted by QuoteIdent and
// QuoteLiteral. DuckDB's sniffer is asked for the dialect and column types,
// and our read_csv call is built from those fields, never from the SQL text
// the sniffer suggests.

// IngestJob is one uploaded file to check and store as Parquet.
type IngestJob struct {
	Dir      string // the job's directory (absolute): holds Input, receives the output; nothing else is reachable
	Input    string // the uploaded file's name in Dir
	Name     string // the file's name as the user knows it, for messages
	MaxBytes int64  // the largest decompressed size accepted (bytes)
	MaxLine  int    // the longest CSV line accepted (bytes); 2 MiB

	// Progress, if set, is called with how the job goes, from one
	// goroutine at a time, every quarter of a second or so once the job has
	// taken a second (waiting for its turn included): a small upload hears
	// nothing. It must not block.
	Progress func(IngestProgress)
}

// IngestResult describes what an upload became: one table, or several (a
// JSON object's arrays of records).
type IngestResult struct {
	SourceFormat string // what came in: "parquet", "csv", "tsv", "json" or "xlsx"
	Encoding     string // a CSV's text encoding, when it was not UTF-8 (transcoded)
	Tables       []IngestTable
}

// IngestTable is one stored Parquet file of an upload.
type IngestTable struct {
	Suffix   string            // "" for a file's one table; else what part of the file it holds (a JSON key, a sheet)
	Output   string            // its name in the job's Dir
	Columns  []datachat.Column // with friendly types and a few sample values
	RowCount int64
	Notes    []string // what the user should know about how it was read (rows skipped, errors dropped)
}

// The files of an ingest job, in its directory. Their names are distinctive
// so that a DuckDB message naming one can be given the user's file name.
const (
	IngestInput      = "dc-input" // the name a caller gives the uploaded file in the job's directory
	fileDecompressed = "dc-decompressed"
	fileUTF8         = "dc-utf8.csv"
	fileOutput       = "dc-output.parquet"
	fileRewritten    = "dc-rewritten.parquet"
)

// DefaultMaxLine is the longest CSV line an upload may have (bytes) when
// neither the job nor the loader sets one: the one default, for both.
const DefaultMaxLine = 2 << 20

// Ingest checks and converts an uploaded file in a worker of its own, at most
// IngestWorkers at once (a job waits its turn, while ctx lasts), and kills it
// past IngestTimeout.
//
// The worker is started ahead, from a pool kept for uploads alone, and
// serves this one job: it takes its limits and Landlock to the job's
// directory only when the job comes, and exits after it, so no upload's
// worker ever sees another's files. Uploads do not queue behind queries:
// their slots are their own; and once one has converted for reserveAfter,
// queries run one fewer at once until it is done (see scheduler.reserve),
// so that it gets a core however many queries there are. A small upload,
// done before that, costs queries nothing.
//
// job.Progress, if set, hears how the job goes once it has taken a second.
//
// Errors: EINVALID naming the file and what is wrong with it; ctx's error.
func (e *Engine) Ingest(ctx context.Context, job IngestJob) (*IngestResult, error) {
	if job.MaxLine <= 0 {
		job.MaxLine = DefaultMaxLine
	}
	relay := newProgressRelay(job.Progress, e.progressAfter, e.progressEvery)
	if err := e.waitIngestSlot(ctx, relay); err != nil {
		return nil, err
	}
	defer func() { <-e.ingest }()
	defer e.reserveAfter(e.ingestReserveAfter)()
	p, err := e.take(&e.uploads)
	if err != nil {
		return nil, err
	}
	defer e.refill(&e.uploads) // once this job is done, not to take its CPU
	defer p.shutdown(time.Second)
	req := &enc{}
	req.byte(opIngest)
	req.str(job.Dir)
	req.str(job.Input)
	req.str(job.Name)
	req.varint(job.MaxBytes)
	req.int(job.MaxLine)
	req.varint(e.opts.MemoryLimit)
	req.int(e.ingestThreads(job))
	lim := e.opts.limits()
	lim.CPU = e.opts.IngestTimeout*time.Duration(e.opts.Threads) + e.opts.KillGrace
	lim.QueryCPU = 0
	lim.encode(req)
	req.varint(int64(e.progressEvery))
	onHard := datachat.Errorf(datachat.EINVALID, "%s took longer than %s to load and was stopped; load a smaller file, or convert it to Parquet first", job.Name, e.opts.IngestTimeout)
	b, err := p.callWith(ctx, req.b, e.opts.IngestTimeout, e.opts.KillGrace, onHard, relay.frame)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var qe *datachat.QueryError
		if errors.As(err, &qe) {
			// The worker died of what the file made it do.
			return nil, datachat.Errorf(datachat.EINVALID, "%s cannot be loaded: %s", job.Name, qe.Message)
		}
		return nil, err
	}
	d, err := decodeReply(b)
	if err != nil {
		return nil, err
	}
	r := &IngestResult{SourceFormat: d.str(), Encoding: d.str()}
	r.Tables = make([]IngestTable, d.count(5))
	for i := range r.Tables {
		r.Tables[i] = IngestTable{Suffix: d.str(), Output: d.str(), Columns: d.columns(), RowCount: d.varint(), Notes: d.strs()}
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(r.Tables) == 0 {
		return nil, errors.New("sql worker stored no table")
	}
	for _, t := range r.Tables {
		if filepath.Base(t.Output) != t.Output || t.Output == "" || t.Output == "." || t.Output == ".." {
			return nil, fmt.Errorf("sql worker named an output outside its directory: %q", t.Output)
		}
	}
	return r, nil
}

// reserveAfter holds a query slot for an upload once d has passed, until
// the returned end is called.
func (e *Engine) reserveAfter(d time.Duration) (end func()) {
	var mu sync.Mutex
	held, ended := false, false
	t := time.AfterFunc(d, func() {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			e.sched.reserve(1)
			held = true
		}
	})
	return func() {
		t.Stop()
		mu.Lock()
		defer mu.Unlock()
		ended = true
		if held {
			e.sched.reserve(-1)
			held = false
		}
	}
}

// waitIngestSlot takes an upload slot, waiting as long as ctx allows, and
// says so to relay while it waits.
func (e *Engine) waitIngestSlot(ctx context.Context, relay *progressRelay) error {
	select {
	case e.ingest <- struct{}{}:
		return nil
	default:
	}
	var tick <-chan time.Time
	if relay != nil {
		t := time.NewTicker(e.progressEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case e.ingest <- struct{}{}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-e.quit:
			return errClosed
		case <-tick:
			relay.send(IngestProgress{Phase: PhaseWaiting, Percent: -1})
		}
	}
}

// ingestThreads is how many DuckDB threads an upload's conversion gets: one
// for a small file that is not compressed (the second thread only adds the
// cost of waking it), else Threads.
func (e *Engine) ingestThreads(job IngestJob) int {
	path := filepath.Join(job.Dir, job.Input)
	fi, err := os.Stat(path)
	if err != nil || fi.Size() >= 32<<20 {
		return e.opts.Threads
	}
	head, err := readHead(path, 4)
	if err != nil {
		return e.opts.Threads
	}
	for _, magic := range [][]byte{{0x1f, 0x8b}, {0x28, 0xb5, 0x2f, 0xfd}, []byte("BZh"), []byte("PK\x03\x04"), oleMagic[:4]} {
		if bytes.HasPrefix(head, magic) {
			return e.opts.Threads // it may unpack to far more than it is
		}
	}
	return 1
}

// serveIngest is an ingest worker's life: one job, one reply, and progress
// frames while it runs.
func serveIngest(w *bufio.Writer, d *dec) int {
	job := IngestJob{Dir: d.str(), Input: d.str(), Name: d.str(), MaxBytes: d.varint(), MaxLine: d.int()}
	memoryLimit, threads := d.varint(), d.int()
	var lim workerLimits
	lim.decode(d)
	every := time.Duration(d.varint())
	if d.err != nil || every <= 0 {
		reply(w, errMalformed, nil)
		return 2
	}
	if _, err := applyLimits(lim, job.Dir, nil); err != nil {
		reply(w, err, nil)
		return 1
	}
	prog := &ingestProgress{dir: job.Dir}
	stop := prog.report(w, max(every, time.Millisecond))
	res, err := ingest(context.Background(), job, memoryLimit, threads, prog)
	stop()
	err = hideErrorPaths(err, job.Dir, nil)
	reply(w, err, func(e *enc) error {
		e.str(res.SourceFormat)
		e.str(res.Encoding)
		e.uvarint(uint64(len(res.Tables)))
		for _, t := range res.Tables {
			e.str(t.Suffix)
			e.str(t.Output)
			e.columns(t.Columns)
			e.varint(t.RowCount)
			e.strs(t.Notes)
		}
		return nil
	})
	return 0
}

// ingest runs inside the worker, in the job's directory.
func ingest(ctx context.Context, job IngestJob, memoryLimit int64, threads int, prog *ingestProgress) (*IngestResult, error) {
	if err := os.Chdir(job.Dir); err != nil {
		return nil, fmt.Errorf("enter job directory: %w", err)
	}
	name := job.Name
	fi, err := os.Stat(job.Input)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if fi.Size() == 0 {
		return nil, datachat.Errorf(datachat.EINVALID, "%s is empty", name)
	}
	prog.set(phaseDecompressing)
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
		{"memory_limit", memSetting(memoryLimit)},
		{"temp_directory", "spill"},
	})
	if err != nil {
		return nil, err
	}
	defer mapping.Close(&db)
	res := &IngestResult{}
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
		s := &ingestSession{conn: conn, name: name, maxLine: job.MaxLine, memoryLimit: memoryLimit}
		prog.converting(conn)
		defer prog.closing()
		var tables []IngestTable
		switch kind {
		case "parquet":
			res.SourceFormat = "parquet"
			notes, err := s.storeParquet(in, fileOutput)
			if err != nil {
				return err
			}
			tables = []IngestTable{{Output: fileOutput, Notes: notes}}
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
			tables = []IngestTable{{Output: fileOutput, Notes: notes}}
		}
		prog.set(phaseDescribing)
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
	for _, f := range []string{IngestInput, fileDecompressed, fileUTF8, fileOutput, fileRewritten} {
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

// storeParquet validates a Parquet file and writes the stored form to out:
// the file itself, or a rewrite where un-annotated BINARY columns holding
// only text become VARCHAR and INT96 timestamps DuckDB cannot convert become
// NULL. It returns notes on what was changed.
func (s *ingestSession) storeParquet(in, out string) ([]string, error) {
	name := s.name
	if err := verifyPageChecksums(in); err != nil {
		return nil, datachat.Errorf(datachat.EINVALID, "%s is corrupt: %v", name, err)
	}
	src := "read_parquet(" + datachat.QuoteLiteral(in) + ")"
	cols, err := s.columns("SELECT * FROM " + src)
	if err != nil {
		return nil, datachat.Errorf(datachat.EINVALID, "%s is not a readable Parquet file: %s", name, s.message(err))
	}
	if len(cols) == 0 {
		return nil, datachat.Errorf(datachat.EINVALID, "%s has no columns", name)
	}
	// Decode every page of every column, so a bad codec or a corrupt page
	// fails now rather than at the first query. Running out of memory is not
	// corruption (a few huge values, a decompression bomb): such a file is
	// kept, and queries over it stop at their memory limit.
	if _, err := queryAll(s.conn, "SELECT max(hash(COLUMNS(*))) FROM "+src, 1, nil); err != nil && !isOOM(err) {
		return nil, datachat.Errorf(datachat.EINVALID, "%s cannot be read: %s", name, s.message(err))
	}
	var repl, notes []string
	for _, c := range cols {
		if c.SQLType != "BLOB" {
			continue
		}
		// Text stored as un-annotated BINARY: valid UTF-8 without control
		// characters in every value.
		q := fmt.Sprintf(`SELECT count(*) FILTER (WHERE %[1]s IS NOT NULL AND (try(decode(%[1]s)) IS NULL OR regexp_matches(try(decode(%[1]s)), '[\x{00}-\x{08}\x{0B}\x{0C}\x{0E}-\x{1F}\x{7F}]'))) = 0 FROM %[2]s`, datachat.QuoteIdent(c.Name), src)
		if r, err := queryAll(s.conn, q, 1, nil); err == nil && len(r.Rows) == 1 && r.Rows[0][0] == true {
			repl = append(repl, fmt.Sprintf("decode(%[1]s) AS %[1]s", datachat.QuoteIdent(c.Name)))
		}
	}
	r, n := s.int96Overflow(in, cols)
	repl, notes = append(repl, r...), append(notes, n...)
	if len(repl) == 0 {
		return nil, os.Rename(in, out)
	}
	q := fmt.Sprintf("COPY (SELECT * REPLACE (%s) FROM %s) TO %s (FORMAT parquet)", strings.Join(repl, ", "), src, datachat.QuoteLiteral(fileRewritten))
	if err := execOne(s.conn, q); err != nil {
		return nil, os.Rename(in, out) // keep the original rather than fail
	}
	return notes, os.Rename(fileRewritten, out)
}

// int96Floor is where a wrapped INT96 timestamp lands: DuckDB converts the
// deprecated 12-byte INT96 timestamps (Impala, older Spark) without an
// overflow check, so one beyond its range (Spark's year 290000) comes back
// as a date thousands of years before year 1, with no error.
const int96Floor = "TIMESTAMP '0001-01-01'"

// int96Overflow finds the top-level INT96 timestamp columns of a Parquet file
// holding such wrapped values, and returns the replacements that make them
// NULL and a note for each column.
func (s *ingestSession) int96Overflow(in string, cols []datachat.Column) (repl, notes []string) {
	schema, err := queryAll(s.conn, "SELECT name FROM parquet_schema("+datachat.QuoteLiteral(in)+") WHERE type = 'INT96'", 10_000, nil)
	if err != nil || len(schema.Rows) == 0 {
		return nil, nil
	}
	int96 := map[string]bool{}
	for _, r := range schema.Rows {
		if n, ok := r[0].(string); ok {
			int96[n] = true
		}
	}
	src := "read_parquet(" + datachat.QuoteLiteral(in) + ")"
	for _, c := range cols {
		if !int96[c.Name] || !strings.HasPrefix(c.SQLType, "TIMESTAMP") {
			continue
		}
		col := datachat.QuoteIdent(c.Name)
		q := fmt.Sprintf("SELECT count(*) FILTER (WHERE %[1]s < %[2]s), min(%[1]s)::VARCHAR FROM %[3]s", col, int96Floor, src)
		r, err := queryAll(s.conn, q, 1, nil)
		if err != nil || len(r.Rows) != 1 {
			continue
		}
		n, _ := r.Rows[0][0].(int64)
		if n == 0 {
			continue
		}
		repl = append(repl, fmt.Sprintf("if(%[1]s < %[2]s, NULL, %[1]s) AS %[1]s", col, int96Floor))
		what := "1 value"
		if n > 1 {
			what = fmt.Sprint(n, " values")
		}
		notes = append(notes, fmt.Sprintf("%s of the INT96 timestamp column %q lay outside the range DuckDB converts and would have read as a date before year 1 (such as %v): NULL",
			what, c.Name, r.Rows[0][1]))
	}
	return repl, notes
}

// storeJSON reads a JSON file — an array of records, or one record per line
// (NDJSON) — and writes it as Parquet: nested objects become STRUCTs, arrays
// LISTs. A file that is one object gives a table for each of its keys that
// holds an array of records (an API response's "items", a graph's "nodes"
// and "links"), or, when none does, a one-row table of the object.
//
// Records whose nested objects differ from one to the next (an event log's
// payloads) would give a STRUCT of thousands of fields, too wide to write
// within the memory limit: then the objects whose fields appear in fewer
// than half the records become MAPs, and failing that everything below the
// second level is kept as JSON text.
func (s *ingestSession) storeJSON(in string) ([]IngestTable, error) {
	if err := checkJSONDepth(in, s.name); err != nil {
		return nil, err
	}
	var err error
	for _, opts := range []string{"", ", field_appearance_threshold = 0.5", ", maximum_depth = 2"} {
		var tables []IngestTable
		tables, err = s.storeJSONAs(in, opts)
		if err == nil {
			return tables, nil
		}
		if !isOOM(err) {
			break
		}
	}
	var de *datachat.Error
	if errors.As(err, &de) {
		return nil, err
	}
	return nil, datachat.Errorf(datachat.EINVALID, "%s cannot be loaded as JSON: %s", s.name, s.message(err))
}

func (s *ingestSession) storeJSONAs(in, opts string) ([]IngestTable, error) {
	// Strings become dates and timestamps when they are ISO 8601, as JSON
	// writes them. DuckDB's default also tries its other formats on every
	// string it samples, which on one long value costs minutes (a 20 MiB
	// string: 30 s a pass, against 3.7 s with ISO alone).
	read := func(more string) string {
		return fmt.Sprintf("read_json(%s, format = 'auto', dateformat = 'ISO', timestampformat = 'ISO'%s%s)", datachat.QuoteLiteral(in), opts, more)
	}
	src := read("")
	cols, err := s.columns("SELECT * FROM " + src)
	if err != nil && strings.Contains(err.Error(), "maximum_object_size") {
		// One value (a record, or the whole top-level object) is larger than
		// DuckDB's 16 MB default: allow one as large as the memory limit
		// holds twice over.
		src = read(fmt.Sprintf(", maximum_object_size = %d", max(min(s.memoryLimit/4, 512<<20), 16<<20)))
		cols, err = s.columns("SELECT * FROM " + src)
	}
	if err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, datachat.Errorf(datachat.EINVALID, "%s holds no records", s.name)
	}
	r, err := queryAll(s.conn, "SELECT count(*) FROM "+src, 1, nil)
	if err != nil {
		return nil, err
	}
	n, _ := r.Rows[0][0].(int64)
	head, err := readHead(in, 4096)
	if err != nil {
		return nil, err
	}
	object := bytes.HasPrefix(bytes.TrimLeft(bytes.TrimPrefix(head, []byte("\xef\xbb\xbf")), " \t\r\n"), []byte("{"))
	if n == 1 && object {
		var tables []IngestTable
		for _, c := range cols {
			if !strings.HasPrefix(c.SQLType, "STRUCT(") || !strings.HasSuffix(c.SQLType, "[]") {
				continue // not an array of records
			}
			out := fmt.Sprintf("dc-output-%d.parquet", len(tables)+1)
			q := fmt.Sprintf("COPY (SELECT r.* FROM (SELECT unnest(%s) AS r FROM %s)) TO %s (FORMAT parquet)", datachat.QuoteIdent(c.Name), src, datachat.QuoteLiteral(out))
			if err := execOne(s.conn, q); err != nil {
				return nil, err
			}
			tables = append(tables, IngestTable{Suffix: c.Name, Output: out})
		}
		if len(tables) > 0 {
			return tables, nil
		}
	}
	if err := execOne(s.conn, fmt.Sprintf("COPY (FROM %s) TO %s (FORMAT parquet)", src, datachat.QuoteLiteral(fileOutput))); err != nil {
		return nil, err
	}
	return []IngestTable{{Output: fileOutput}}, nil
}

// storeWorkbook reads an Excel workbook (internal/xlsx finds each sheet's
// table and types its columns) and writes each sheet with data as Parquet,
// through a typed CSV and our own read_csv call.
func (s *ingestSession) storeWorkbook(in string) ([]IngestTable, error) {
	lim := xlsx.DefaultLimits()
	lim.TempDir = "xlsx-tmp"
	if err := os.MkdirAll(lim.TempDir, 0o700); err != nil {
		return nil, err
	}
	wb, err := xlsx.Open(in, s.name, lim)
	if err != nil {
		return nil, err // a message for the user already
	}
	defer wb.Close()
	var tables []IngestTable
	for i, sh := range wb.Sheets {
		csvName := fmt.Sprintf("dc-sheet-%d.csv", i+1)
		f, err := os.Create(csvName)
		if err != nil {
			return nil, err
		}
		bw := bufio.NewWriterSize(f, 1<<20)
		info, err := sh.WriteCSV(bw)
		if err == nil {
			err = bw.Flush()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("%s, sheet %q: %w", s.name, sh.Name, err)
		}
		cols := make([]string, len(sh.Columns))
		var notes []string
		for j, c := range sh.Columns {
			cols[j] = datachat.QuoteLiteral(c.Name) + ": " + datachat.QuoteLiteral(c.Type)
			if c.Percent {
				notes = append(notes, fmt.Sprintf("column %q holds fractions the sheet showed as percentages (0.125 for 12.5%%)", c.Name))
			}
		}
		out := fmt.Sprintf("dc-output-%d.parquet", i+1)
		q := fmt.Sprintf("COPY (FROM read_csv(%s, auto_detect = false, header = true, delim = ',', quote = '\"', escape = '\"', new_line = '\\n', columns = {%s}, max_line_size = %d)) TO %s (FORMAT parquet)",
			datachat.QuoteLiteral(csvName), strings.Join(cols, ", "), max(info.MaxLineSize+1, DefaultMaxLine), datachat.QuoteLiteral(out))
		if err := execOne(s.conn, q); err != nil {
			return nil, datachat.Errorf(datachat.EINVALID, "%s, sheet %q, cannot be stored: %s", s.name, sh.Name, s.message(err))
		}
		os.Remove(csvName)
		tables = append(tables, IngestTable{Suffix: sh.Name, Output: out, Notes: append(sh.Notes, notes...)})
	}
	if len(tables) > 0 && len(wb.Skipped) > 0 {
		tables[0].Notes = append(tables[0].Notes, wb.Skipped...)
	}
	return tables, nil
}

// maxJSONDepth is the deepest nesting of arrays and objects accepted: DuckDB's
// JSON reader recurses once per level, and a few hundred thousand levels
// (a few hundred kilobytes of brackets) overflow its stack.
const maxJSONDepth = 1000

// checkJSONDepth refuses a file nested deeper than maxJSONDepth, or that
// DuckDB would not read as JSON in a way that could hide nesting from the
// count (scanJSON).
func checkJSONDepth(path, name string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = scanJSON(bufio.NewReaderSize(f, 1<<20), name, maxJSONDepth)
	return err
}

// storeCSV reads a CSV/TSV file and writes it as Parquet to out. It returns
// the text encoding when it was not UTF-8, the delimiter, and notes on how
// it was read (numbers converted).
func (s *ingestSession) storeCSV(ctx context.Context, in, out string) (encName, delim string, notes []string, err error) {
	name := s.name
	head, err := readHead(in, 64<<10)
	if err != nil {
		return "", "", nil, err
	}
	enc, err := detectEncoding(head, name)
	if err != nil {
		return "", "", nil, err
	}
	src := in
	transcodeTo := func(enc textEncoding) error {
		src = fileUTF8
		if err := transcode(ctx, in, src, enc.enc, s.maxLine, name); err != nil {
			var de *datachat.Error
			if errors.As(err, &de) {
				return err
			}
			return datachat.Errorf(datachat.EINVALID, "%s cannot be read as %s text: %v", name, enc.name, err)
		}
		return nil
	}
	if enc.enc != nil {
		if err := transcodeTo(enc); err != nil {
			return "", "", nil, err
		}
	}
	delim, notes, err = s.copyCSV(src, out)
	if isInvalidUnicode(err) && enc.enc == nil {
		// Not UTF-8 after all, past the start of the file.
		if enc, err = legacyEncodingOfFile(in); err != nil {
			return "", "", nil, err
		}
		if err := transcodeTo(enc); err != nil {
			return "", "", nil, err
		}
		delim, notes, err = s.copyCSV(src, out)
	}
	if err != nil {
		var de *datachat.Error
		switch {
		case errors.As(err, &de):
			return "", "", nil, err
		case enc.name != "":
			return "", "", nil, datachat.Errorf(datachat.EINVALID, "%s (read as %s) cannot be loaded: %s", name, enc.name, s.message(err))
		}
		return "", "", nil, datachat.Errorf(datachat.EINVALID, "%s cannot be loaded as CSV: %s", name, s.message(err))
	}
	return enc.name, delim, notes, nil
}

// copyCSV converts a UTF-8 CSV file to Parquet and returns its delimiter,
// and notes on numbers it converted (numberFormats).
func (s *ingestSession) copyCSV(src, out string) (string, []string, error) {
	sn, err := s.sniff(src)
	if err != nil {
		return "", nil, err
	}
	// copyTo writes the file to dst, reading the columns of conv as text
	// and converting them.
	convert := func(read, dst string, conv []numConversion) error {
		sel := "FROM " + read
		if len(conv) > 0 {
			repl := make([]string, len(conv))
			for i, c := range conv {
				repl[i] = c.expr() + " AS " + datachat.QuoteIdent(c.name)
			}
			sel = "SELECT * REPLACE (" + strings.Join(repl, ", ") + ") FROM " + read
		}
		return execOne(s.conn, fmt.Sprintf("COPY (%s) TO %s (FORMAT parquet)", sel, datachat.QuoteLiteral(dst)))
	}
	copyTo := func(dst string, conv []numConversion) error {
		asText := map[string]bool{}
		for _, c := range conv {
			asText[c.name] = true
		}
		try := func(read string) error { return convert(read, dst, conv) }
		read := sn.readCall(src, s.maxLine, asText)
		if sn.header != sn.sniffedHeader {
			// We read the first row differently from the sniffer, so its
			// column names and types do not hold: let read_csv detect them
			// again.
			read = fmt.Sprintf("read_csv(%s, header = %t, max_line_size = %d%s)", datachat.QuoteLiteral(src), sn.header, s.maxLine, typesArg(asText))
		}
		err := try(read)
		if err != nil && !isInvalidUnicode(err) {
			// The sniffer guesses column types from a sample; a value
			// further down may not fit. Sniff the whole file instead.
			err = try(fmt.Sprintf("read_csv(%s, header = %t, sample_size = -1, max_line_size = %d%s)", datachat.QuoteLiteral(src), sn.header, s.maxLine, typesArg(asText)))
		}
		return err
	}
	if err := copyTo(out, nil); err != nil {
		return "", nil, err
	}
	conv, notes := s.csvNumbers(src, sn, out)
	if len(conv) > 0 {
		// Text columns hold their raw text in the stored file, which is
		// quicker to read again than the CSV; fractions do not.
		from := func() error { return convert("read_parquet("+datachat.QuoteLiteral(out)+")", fileRewritten, conv) }
		for _, c := range conv {
			if c.sniffed != "VARCHAR" {
				from = func() error { return copyTo(fileRewritten, conv) }
			}
		}
		if err := from(); err != nil {
			// Best effort: the numbers stay as DuckDB read them.
			os.Remove(fileRewritten)
			return sn.delim, nil, nil
		}
		if err := os.Rename(fileRewritten, out); err != nil {
			return "", nil, err
		}
	}
	return sn.delim, notes, nil
}

// csvNumbers finds the columns of numbers written with a decimal comma or
// thousands separators (numberFormats) in a CSV file stored as out. It is
// best effort: what it cannot read is left as DuckDB read it.
func (s *ingestSession) csvNumbers(src string, sn *csvSniff, out string) ([]numConversion, []string) {
	stored := "read_parquet(" + datachat.QuoteLiteral(out) + ")"
	cols, err := s.columns("SELECT * FROM " + stored)
	if err != nil {
		return nil, nil
	}
	// The raw text of fractions comes from the sniffer's read of the file,
	// when it named the columns as they were stored.
	var asText func([]string) string
	if sn.header == sn.sniffedHeader && len(cols) == len(sn.columns) {
		asText = func(names []string) string {
			m := make(map[string]bool, len(names))
			for _, n := range names {
				m[n] = true
			}
			return sn.readCall(src, s.maxLine, m)
		}
		for i, c := range cols {
			if sn.columns[i][0] != c.Name {
				asText = nil
				break
			}
		}
	}
	conv, notes, err := s.numberFormats(stored, cols, asText)
	if err != nil {
		return nil, nil
	}
	return conv, notes
}

// typesArg is read_csv's types argument reading the named columns as text,
// or "" for none.
func typesArg(text map[string]bool) string {
	if len(text) == 0 {
		return ""
	}
	var fields []string
	for name := range text {
		fields = append(fields, datachat.QuoteLiteral(name)+": 'VARCHAR'")
	}
	sort.Strings(fields)
	return ", types = {" + strings.Join(fields, ", ") + "}"
}

// csvSniff is what DuckDB's sniffer found in a CSV file, as data.
type csvSniff struct {
	header        bool // our decision
	sniffedHeader bool // DuckDB's
	delim         string
	quote         string
	escape        string
	newline       string
	comment       string
	skip          int64
	columns       [][2]string // name, type
	dateFormat    string
	tsFormat      string
}

// dialectArgs are read_csv's arguments for the file and its sniffed
// dialect: every value a literal.
func (sn *csvSniff) dialectArgs(file string) []string {
	return []string{
		datachat.QuoteLiteral(file),
		"delim = " + datachat.QuoteLiteral(sn.delim),
		"quote = " + datachat.QuoteLiteral(sn.quote),
		"escape = " + datachat.QuoteLiteral(sn.escape),
		"new_line = " + datachat.QuoteLiteral(sn.newline),
		"comment = " + datachat.QuoteLiteral(sn.comment),
		fmt.Sprintf("skip = %d", sn.skip),
	}
}

// readCall builds the read_csv call for the sniffed dialect and columns:
// every value a literal, every name a quoted string. The columns named in
// text are read as VARCHAR, whatever the sniffer made of them.
func (sn *csvSniff) readCall(file string, maxLine int, text map[string]bool) string {
	cols := make([]string, len(sn.columns))
	for i, c := range sn.columns {
		typ := c[1]
		if text[c[0]] {
			typ = "VARCHAR"
		}
		cols[i] = datachat.QuoteLiteral(c[0]) + ": " + datachat.QuoteLiteral(typ)
	}
	args := append(sn.dialectArgs(file),
		"auto_detect = false",
		fmt.Sprintf("header = %t", sn.header),
		"columns = {"+strings.Join(cols, ", ")+"}",
		fmt.Sprintf("max_line_size = %d", maxLine),
	)
	if sn.dateFormat != "" {
		args = append(args, "dateformat = "+datachat.QuoteLiteral(sn.dateFormat))
	}
	if sn.tsFormat != "" {
		args = append(args, "timestampformat = "+datachat.QuoteLiteral(sn.tsFormat))
	}
	return "read_csv(" + strings.Join(args, ", ") + ")"
}

// sniffText reads one of sniff_csv's text fields, which says "(empty)" for
// an empty one.
func sniffText(v any) string {
	s, _ := v.(string)
	if s == "(empty)" {
		return ""
	}
	return s
}

// sniff runs DuckDB's sniffer and decides whether the first row is a header.
// DuckDB decides by types: a first row of text over columns of numbers or
// dates is a header. When every column is text it cannot tell, and it says
// no even for a plain header (fivethirtyeight's cabinet-turnover.csv, with
// two empty column names). Then the first row is taken as a header when its
// non-empty cells are most of the row, none looks like a number, all differ,
// and none recurs further down its column.
func (s *ingestSession) sniff(src string) (*csvSniff, error) {
	r, err := queryAll(s.conn, fmt.Sprintf("SELECT Delimiter, Quote, Escape, NewLineDelimiter, Comment, SkipRows, HasHeader, Columns, DateFormat, TimestampFormat FROM sniff_csv(%s, max_line_size = %d)", datachat.QuoteLiteral(src), s.maxLine), 1, nil)
	if err != nil {
		return nil, err
	}
	if len(r.Rows) != 1 {
		return nil, errors.New("the sniffer returned nothing")
	}
	row := r.Rows[0]
	sn := &csvSniff{
		delim: sniffText(row[0]), quote: sniffText(row[1]), escape: sniffText(row[2]), newline: sniffText(row[3]),
		comment: sniffText(row[4]), dateFormat: sniffText(row[8]), tsFormat: sniffText(row[9]),
	}
	switch v := row[5].(type) {
	case int64:
		sn.skip = v
	case string:
		sn.skip, _ = strconv.ParseInt(v, 10, 64)
	}
	sn.sniffedHeader, _ = row[6].(bool)
	sn.header = sn.sniffedHeader
	allText := true
	list, _ := row[7].([]any)
	for _, c := range list {
		obj, _ := c.(Object)
		var name, typ string
		for _, f := range obj {
			switch f.Key {
			case "name":
				name, _ = f.Value.(string)
			case "type":
				typ, _ = f.Value.(string)
			}
		}
		if typ != "VARCHAR" {
			allText = false
		}
		sn.columns = append(sn.columns, [2]string{name, typ})
	}
	if len(sn.columns) == 0 {
		return nil, errors.New("the sniffer found no columns")
	}
	if sn.header || !allText {
		return sn, nil
	}
	grid, err := queryAll(s.conn, fmt.Sprintf("SELECT * FROM read_csv(%s, header = false, all_varchar = true, max_line_size = %d) LIMIT 1000", datachat.QuoteLiteral(src), s.maxLine), -1, nil)
	if err != nil {
		return nil, err
	}
	sn.header = looksLikeHeader(grid.Rows)
	return sn, nil
}

func looksLikeHeader(grid [][]any) bool {
	if len(grid) < 2 {
		return false
	}
	cell := func(row []any, i int) (string, bool) {
		s, ok := row[i].(string)
		return strings.TrimSpace(s), ok
	}
	first := grid[0]
	seen := map[string]bool{}
	nonEmpty := 0
	for i := range first {
		v, ok := cell(first, i)
		if !ok || v == "" {
			continue
		}
		nonEmpty++
		if _, err := strconv.ParseFloat(strings.ReplaceAll(v, ",", ""), 64); err == nil {
			return false
		}
		if seen[v] {
			return false
		}
		seen[v] = true
		for _, row := range grid[1:] {
			if w, ok := cell(row, i); ok && w == v {
				return false
			}
		}
	}
	return nonEmpty*2 > len(first)
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
		cols[i].Type = FriendlyType(cols[i].SQLType)
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
