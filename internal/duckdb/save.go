package duckdb

import (
	"bufio"
	"context"
	"database/sql/driver"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	duckdbdriver "github.com/duckdb/duckdb-go/v2"
	"github.com/duckdb/duckdb-go/v2/mapping"
	"github.com/google/uuid"

	"datachat"
)

// A query's result saved as a dataset (execute_sql's save_as) comes from a
// database source, row by row: the server writes the rows it streams to a
// spool file in a job directory ([Spool]), learning from the values which
// DuckDB type each column keeps, and a worker of its own ([Engine.Save])
// reads the spool, creates the table with our own CREATE TABLE (every name
// quoted by QuoteIdent, every type one of saveTypes), appends the rows
// through DuckDB's appender as typed Go values — no value ever becomes SQL
// text — and writes it as Parquet. The rows are never all held in memory,
// on either side.

// SaveColumn is a column of a saved table: its name and the DuckDB type it
// is stored with (one of saveTypes).
type SaveColumn struct {
	Name string
	Type string
}

// SaveJob is a spool of rows to store as Parquet.
type SaveJob struct {
	Dir     string       // the job's directory (absolute): holds Spool, receives the output; nothing else is reachable
	Spool   string       // the spool's name in Dir, written by a [Spool]
	Name    string       // the table's name, for messages
	Columns []SaveColumn // from [Spool.SaveColumns]
}

// saveTypes are the types a saved column may have; DECIMAL carries its
// width and scale.
var saveTypes = regexp.MustCompile(`^(BIGINT|UBIGINT|DOUBLE|BOOLEAN|DATE|TIME|TIMESTAMP|TIMESTAMPTZ|UUID|BLOB|VARCHAR|DECIMAL\(([1-9]|[1-3][0-9]),([0-9]|[1-3][0-9])\))$`)

// maxSaveColumnName caps a saved column's name, in characters.
const maxSaveColumnName = 255

// errSpoolFull is what a spool past its byte cap answers.
type errSpoolFull struct{ max int64 }

func (e errSpoolFull) Error() string {
	return fmt.Sprintf("the rows are larger than the largest dataset accepted (%s, DATACHAT_MAX_DATASET_BYTES): save fewer rows or columns (aggregate in the query, or select only the columns needed)", SizeText(e.max))
}

// Spool writes a query's rows, as they arrive, to a file a save job's worker
// reads ([Engine.Save]), at most MaxBytes of them, and learns from the values
// the DuckDB type each column is stored with. It is a [datachat.RowSink].
type Spool struct {
	w        *bufio.Writer
	maxBytes int64
	written  int64
	cols     []datachat.Column
	names    []string
	stats    []colStats
	rows     int64
	e        enc
}

// NewSpool returns a spool writing to w, at most maxBytes bytes (≤ 0: no
// cap). Call Flush when the rows are written.
func NewSpool(w io.Writer, maxBytes int64) *Spool {
	return &Spool{w: bufio.NewWriterSize(w, 1<<20), maxBytes: maxBytes}
}

// Columns takes the result's columns; their names are made fit for a table
// (see SaveColumnNames).
func (s *Spool) Columns(cols []datachat.Column) error {
	if s.cols != nil {
		return errors.New("spool: columns given twice")
	}
	if len(cols) == 0 {
		return datachat.Errorf(datachat.EINVALID, "the query returns no columns: there is nothing to save")
	}
	s.cols = cols
	s.names = SaveColumnNames(cols)
	s.stats = make([]colStats, len(cols))
	for i, c := range cols {
		s.stats[i] = newColStats(c)
	}
	return nil
}

// Row writes one row.
func (s *Spool) Row(values []any) error {
	if len(values) != len(s.cols) {
		return fmt.Errorf("spool: a row of %d values for %d columns", len(values), len(s.cols))
	}
	s.e.b = s.e.b[:0]
	for i, v := range values {
		s.stats[i].see(v)
		if err := s.e.value(spoolValue(v)); err != nil {
			return err
		}
	}
	n := int64(len(s.e.b)) + 4
	if s.maxBytes > 0 && s.written+n > s.maxBytes {
		return datachat.Errorf(datachat.EINVALID, "%s", errSpoolFull{s.maxBytes}.Error())
	}
	var l [4]byte
	l[0], l[1], l[2], l[3] = byte(len(s.e.b)>>24), byte(len(s.e.b)>>16), byte(len(s.e.b)>>8), byte(len(s.e.b))
	if _, err := s.w.Write(l[:]); err != nil {
		return datachat.ClassifyNoSpace(err)
	}
	if _, err := s.w.Write(s.e.b); err != nil {
		return datachat.ClassifyNoSpace(err)
	}
	s.written += n
	s.rows++
	return nil
}

// Flush writes what is buffered.
func (s *Spool) Flush() error { return datachat.ClassifyNoSpace(s.w.Flush()) }

// Rows is how many rows were written.
func (s *Spool) Rows() int64 { return s.rows }

// SaveColumns are the columns to store the rows with: each name made fit for
// a table, each type the narrowest of saveTypes that holds every value the
// column had (text when none does).
func (s *Spool) SaveColumns() []SaveColumn {
	out := make([]SaveColumn, len(s.cols))
	for i := range s.cols {
		out[i] = SaveColumn{Name: s.names[i], Type: s.stats[i].duckType()}
	}
	return out
}

// spoolValue is a value as the spool keeps it: what a result row holds
// (nil, bool, int64, json.Number, string, lists), with any other number
// written as a json.Number.
func spoolValue(v any) any {
	switch x := v.(type) {
	case float64:
		return json.Number(strconv.FormatFloat(x, 'g', -1, 64))
	case int:
		return int64(x)
	case []any:
		out := make([]any, len(x))
		for i, c := range x {
			out[i] = spoolValue(c)
		}
		return out
	}
	return v
}

// SaveColumnNames makes the names of a result's columns fit for a table:
// control characters dropped, at most maxSaveColumnName characters, an
// empty name called column_N, and a name equal to an earlier one but for
// case (DuckDB's names are case-insensitive) given _2, _3….
func SaveColumnNames(cols []datachat.Column) []string {
	out := make([]string, len(cols))
	used := map[string]bool{}
	for i, c := range cols {
		name := strings.Map(func(r rune) rune {
			if unicode.IsControl(r) || r == utf8.RuneError {
				return -1
			}
			return r
		}, strings.ToValidUTF8(c.Name, ""))
		name = strings.TrimSpace(name)
		if r := []rune(name); len(r) > maxSaveColumnName {
			name = string(r[:maxSaveColumnName])
		}
		if name == "" {
			name = fmt.Sprintf("column_%d", i+1)
		}
		base := name
		for k := 2; used[strings.ToLower(name)]; k++ {
			name = fmt.Sprintf("%s_%d", base, k)
		}
		used[strings.ToLower(name)] = true
		out[i] = name
	}
	return out
}

// Save stores a spool of rows as Parquet in a worker of its own, at most
// IngestWorkers at once with the ingests, and kills it past IngestTimeout.
// The table it returns names its Output in job.Dir, with the columns as
// stored (their sample values too) and the row count.
//
// Errors: EINVALID naming the table and what is wrong; ctx's error.
func (e *Engine) Save(ctx context.Context, job SaveJob) (*IngestTable, error) {
	if len(job.Columns) == 0 {
		return nil, datachat.Errorf(datachat.EINVALID, "%s: no columns to save", job.Name)
	}
	select {
	case e.ingest <- struct{}{}:
		defer func() { <-e.ingest }()
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-e.quit:
		return nil, errClosed
	}
	p, err := startProc(&e.opts)
	if err != nil {
		return nil, err
	}
	defer p.shutdown(time.Second)
	req := &enc{}
	req.byte(opSave)
	req.str(job.Dir)
	req.str(job.Spool)
	req.str(job.Name)
	req.uvarint(uint64(len(job.Columns)))
	for _, c := range job.Columns {
		req.str(c.Name)
		req.str(c.Type)
	}
	req.varint(e.opts.MemoryLimit)
	req.int(e.opts.Threads)
	lim := e.opts.limits()
	lim.CPU = e.opts.IngestTimeout*time.Duration(e.opts.Threads) + e.opts.KillGrace
	lim.QueryCPU = 0
	lim.encode(req)
	onHard := datachat.Errorf(datachat.EINVALID, "saving %s took longer than %s and was stopped; save fewer rows", job.Name, e.opts.IngestTimeout)
	b, err := p.call(ctx, req.b, e.opts.IngestTimeout, e.opts.KillGrace, onHard)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var qe *datachat.QueryError
		if errors.As(err, &qe) {
			return nil, datachat.Errorf(datachat.EINVALID, "%s cannot be saved: %s", job.Name, qe.Message)
		}
		return nil, err
	}
	d, err := decodeReply(b)
	if err != nil {
		return nil, err
	}
	t := &IngestTable{Output: d.str(), Columns: d.columns(), RowCount: d.varint()}
	if d.err != nil {
		return nil, d.err
	}
	if filepath.Base(t.Output) != t.Output || t.Output == "" || t.Output == "." || t.Output == ".." {
		return nil, fmt.Errorf("sql worker named an output outside its directory: %q", t.Output)
	}
	return t, nil
}

// serveSave is a save worker's life: one job, one reply.
func serveSave(w *bufio.Writer, d *dec) int {
	job := SaveJob{Dir: d.str(), Spool: d.str(), Name: d.str()}
	job.Columns = make([]SaveColumn, d.count(2))
	for i := range job.Columns {
		job.Columns[i] = SaveColumn{Name: d.str(), Type: d.str()}
	}
	memoryLimit, threads := d.varint(), d.int()
	var lim workerLimits
	lim.decode(d)
	if d.err != nil {
		reply(w, d.err, nil)
		return 2
	}
	if _, err := applyLimits(lim, job.Dir, nil); err != nil {
		reply(w, err, nil)
		return 1
	}
	t, err := save(context.Background(), job, memoryLimit, threads)
	err = hideErrorPaths(err, job.Dir, nil)
	reply(w, err, func(e *enc) error {
		e.str(t.Output)
		e.columns(t.Columns)
		e.varint(t.RowCount)
		return nil
	})
	return 0
}

// savedTable is the table a save job builds; a name of our own.
const savedTable = "dc_saved"

// save runs inside the worker, in the job's directory.
func save(ctx context.Context, job SaveJob, memoryLimit int64, threads int) (*IngestTable, error) {
	if err := os.Chdir(job.Dir); err != nil {
		return nil, fmt.Errorf("enter job directory: %w", err)
	}
	defs := make([]string, len(job.Columns))
	seen := map[string]bool{}
	for i, c := range job.Columns {
		if !saveTypes.MatchString(c.Type) {
			return nil, fmt.Errorf("column %q: type %q is not one a saved table has", c.Name, c.Type)
		}
		if c.Name == "" || strings.IndexByte(c.Name, 0) >= 0 || seen[strings.ToLower(c.Name)] {
			return nil, fmt.Errorf("column %d: name %q is empty, repeated or holds a NUL", i+1, c.Name)
		}
		seen[strings.ToLower(c.Name)] = true
		defs[i] = datachat.QuoteIdent(c.Name) + " " + c.Type
	}
	if err := appendSpool(ctx, job, defs, memoryLimit, threads); err != nil {
		return nil, err
	}
	// Read back as an upload is: the columns as stored, samples, the count.
	db, err := openDatabase("", [][2]string{{"threads", strconv.Itoa(threads)}, {"memory_limit", memSetting(memoryLimit)}, {"temp_directory", "spill"}})
	if err != nil {
		return nil, err
	}
	defer mapping.Close(&db)
	t := &IngestTable{Output: fileOutput}
	err = withConn(ctx, db, func(conn mapping.Connection) error {
		if err := lockDown(conn); err != nil {
			return err
		}
		s := &ingestSession{conn: conn, name: job.Name, memoryLimit: memoryLimit}
		var err error
		if t.Columns, t.RowCount, err = s.describe(fileOutput); err != nil {
			return datachat.Errorf(datachat.EINVALID, "%s: the stored Parquet file cannot be read back: %s", job.Name, s.message(err))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// lockDown puts an ingest or save DuckDB in the sandbox of a query's: only
// the job's directory, nothing else reachable, no setting changed after.
func lockDown(conn mapping.Connection) error {
	dir, err := filepath.Abs(".")
	if err != nil {
		return err
	}
	for _, q := range []string{
		"SET GLOBAL allowed_directories = [" + datachat.QuoteLiteral(dir+string(filepath.Separator)) + "]",
		"SET GLOBAL enable_external_access = false",
		"SET GLOBAL lock_configuration = true",
	} {
		if err := execOne(conn, q); err != nil {
			return fmt.Errorf("sandbox setup %q: %w", q, err)
		}
	}
	return nil
}

// appendSpool creates the table, appends the spool's rows with DuckDB's
// appender, and writes the table as Parquet.
func appendSpool(ctx context.Context, job SaveJob, defs []string, memoryLimit int64, threads int) error {
	dsn := fmt.Sprintf("?threads=%d&memory_limit=%s&temp_directory=spill&autoinstall_known_extensions=false&autoload_known_extensions=false&allow_community_extensions=false&allow_unsigned_extensions=false&allow_persistent_secrets=false",
		threads, memSetting(memoryLimit))
	connector, err := duckdbdriver.NewConnector(dsn, nil)
	if err != nil {
		return fmt.Errorf("open duckdb: %w", err)
	}
	defer connector.Close()
	c, err := connector.Connect(ctx)
	if err != nil {
		return fmt.Errorf("connect to duckdb: %w", err)
	}
	defer c.Close()
	exec := func(q string) error {
		if strings.IndexByte(q, 0) >= 0 {
			return errors.New("a statement of our own contains a NUL byte")
		}
		_, err := c.(driver.ExecerContext).ExecContext(ctx, q, nil)
		return err
	}
	dir, err := filepath.Abs(".")
	if err != nil {
		return err
	}
	for _, q := range []string{
		"SET GLOBAL allowed_directories = [" + datachat.QuoteLiteral(dir+string(filepath.Separator)) + "]",
		"SET GLOBAL enable_external_access = false",
		"SET GLOBAL lock_configuration = true",
		"CREATE TABLE " + datachat.QuoteIdent(savedTable) + " (" + strings.Join(defs, ", ") + ")",
	} {
		if err := exec(q); err != nil {
			return fmt.Errorf("%s: %w", strings.SplitN(q, " (", 2)[0], err)
		}
	}
	a, err := duckdbdriver.NewAppenderFromConn(c, "", savedTable)
	if err != nil {
		return fmt.Errorf("appender: %w", err)
	}
	f, err := os.Open(job.Spool)
	if err != nil {
		a.Close()
		return fmt.Errorf("read the rows: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	row := make([]driver.Value, len(job.Columns))
	for n := int64(1); ; n++ {
		b, err := readFrame(r)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			a.Close()
			return fmt.Errorf("read row %d: %w", n, err)
		}
		d := &dec{b: b}
		for i, col := range job.Columns {
			v := d.value(0)
			if d.err != nil {
				a.Close()
				return fmt.Errorf("read row %d: %w", n, d.err)
			}
			if row[i], err = saveValue(v, col.Type); err != nil {
				a.Close()
				return datachat.Errorf(datachat.EINVALID, "%s: row %d, column %q: %v", job.Name, n, col.Name, err)
			}
		}
		if err := a.AppendRow(row...); err != nil {
			a.Close()
			return datachat.Errorf(datachat.EINVALID, "%s: row %d: %v", job.Name, n, err)
		}
	}
	if err := a.Close(); err != nil {
		return datachat.Errorf(datachat.EINVALID, "%s: %v", job.Name, err)
	}
	f.Close()
	os.Remove(job.Spool) // its space, for the Parquet file
	return exec("COPY " + datachat.QuoteIdent(savedTable) + " TO " + datachat.QuoteLiteral(fileOutput) + " (FORMAT parquet)")
}

// saveValue converts a spooled value to the Go value DuckDB's appender takes
// for a column of type typ.
func saveValue(v any, typ string) (driver.Value, error) {
	if v == nil {
		return nil, nil
	}
	if typ == "VARCHAR" {
		switch x := v.(type) {
		case string:
			return x, nil
		case bool:
			return strconv.FormatBool(x), nil
		}
		if s, ok := numberText(v); ok {
			return s, nil
		}
		b, err := json.Marshal(jsonReady(v))
		if err != nil {
			return nil, err
		}
		return string(b), nil
	}
	if typ == "BOOLEAN" {
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("%v is not a boolean", v)
		}
		return b, nil
	}
	s, ok := numberText(v)
	if !ok {
		return nil, fmt.Errorf("a %T does not fit %s", v, typ)
	}
	bad := func() (driver.Value, error) { return nil, fmt.Errorf("%q does not fit %s", clipText(s), typ) }
	switch {
	case typ == "BIGINT":
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return bad()
		}
		return n, nil
	case typ == "UBIGINT":
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return bad()
		}
		return n, nil
	case typ == "DOUBLE":
		f, ok := parseFloat(s)
		if !ok {
			return bad()
		}
		return f, nil
	case strings.HasPrefix(typ, "DECIMAL("):
		var w, sc int
		if _, err := fmt.Sscanf(typ, "DECIMAL(%d,%d)", &w, &sc); err != nil {
			return bad()
		}
		n, ok := unscaled(s, sc)
		if !ok {
			return bad()
		}
		return duckdbdriver.Decimal{Width: uint8(w), Scale: uint8(sc), Value: n}, nil
	case typ == "DATE":
		t, err := parseDate(s)
		if err != nil {
			return bad()
		}
		return t, nil
	case typ == "TIME":
		t, err := parseClock(s)
		if err != nil {
			return bad()
		}
		return t, nil
	case typ == "TIMESTAMP", typ == "TIMESTAMPTZ":
		t, err := parseTimestamp(s, typ == "TIMESTAMPTZ")
		if err != nil {
			return bad()
		}
		return t, nil
	case typ == "UUID":
		u, err := uuid.Parse(s)
		if err != nil {
			return bad()
		}
		return duckdbdriver.UUID(u), nil
	case typ == "BLOB":
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return bad()
		}
		return b, nil
	}
	return bad()
}

// jsonReady turns a spooled list back into what encoding/json writes.
func jsonReady(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, c := range x {
			out[i] = jsonReady(c)
		}
		return out
	case Object:
		m := make(map[string]any, len(x))
		for _, f := range x {
			m[f.Key] = jsonReady(f.Value)
		}
		return m
	}
	return v
}

func clipText(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return s
}
