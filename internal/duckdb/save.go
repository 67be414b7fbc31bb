package duckdb

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"datachat"
	"datachat/internal/duckdb/wire"
)

// A query's result saved as a dataset (execute_sql's save_as) comes from a
// database source, row by row: the server writes the rows it streams to a
// spool file in a job directory ([Spool]), learning from the values which
// DuckDB type each column keeps, and a worker of its own ([Engine.Save])
// reads the spool and stores it as Parquet (package worker, save.go). The
// rows are never all held in memory, on either side.

// SaveColumn is a column of a saved table: its name and the DuckDB type it
// is stored with (one of wire.SaveTypes).
type SaveColumn = wire.SaveColumn

// SaveJob is a spool of rows to store as Parquet.
type SaveJob = wire.SaveJob

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
	e        wire.Enc
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
	s.e.Reset()
	for i, v := range values {
		s.stats[i].see(v)
		if err := s.e.Value(spoolValue(v)); err != nil {
			return err
		}
	}
	b := s.e.Bytes()
	n := int64(len(b)) + 4
	if s.maxBytes > 0 && s.written+n > s.maxBytes {
		return datachat.Errorf(datachat.EINVALID, "%s", errSpoolFull{s.maxBytes}.Error())
	}
	var l [4]byte
	l[0], l[1], l[2], l[3] = byte(len(b)>>24), byte(len(b)>>16), byte(len(b)>>8), byte(len(b))
	if _, err := s.w.Write(l[:]); err != nil {
		return datachat.ClassifyNoSpace(err)
	}
	if _, err := s.w.Write(b); err != nil {
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
// a table, each type the narrowest of wire.SaveTypes that holds every value the
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
	req := &wire.Save{Job: job, MemoryLimit: e.opts.MemoryLimit, Threads: e.opts.Threads, Limits: e.opts.jobLimits()}
	onHard := datachat.Errorf(datachat.EINVALID, "saving %s took longer than %s and was stopped; save fewer rows", job.Name, e.opts.IngestTimeout)
	b, err := p.call(ctx, wire.OpSave, req.Encode(), e.opts.IngestTimeout, e.opts.KillGrace, onHard)
	if err != nil {
		return nil, jobFailed(ctx, err, job.Name, "saved")
	}
	t := &IngestTable{}
	if err := wire.DecodeReplyWith(b, t.DecodeSaved); err != nil {
		return nil, err
	}
	if err := checkOutput(t.Output); err != nil {
		return nil, err
	}
	return t, nil
}
