package duckdb

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/duckdb/duckdb-go/v2/mapping"

	"datachat"
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
