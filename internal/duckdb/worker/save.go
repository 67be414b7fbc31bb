package worker

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
	"strconv"
	"strings"

	duckdbdriver "github.com/duckdb/duckdb-go/v2"
	"github.com/duckdb/duckdb-go/v2/mapping"
	"github.com/google/uuid"

	"datachat"
	"datachat/internal/duckdb/wire"
)

// A save worker reads a spool of rows the server wrote (duckdb.Spool),
// creates the table with our own CREATE TABLE (every name quoted by
// QuoteIdent, every type one of wire.SaveTypes), appends the rows through
// DuckDB's appender as typed Go values — no value ever becomes SQL text —
// and writes it as Parquet.

// serveSave is a save worker's life: one job, one reply.
func serveSave(w *bufio.Writer, d *wire.Dec) int {
	var req wire.Save
	req.Decode(d)
	if d.Err() != nil {
		reply(w, d.Err(), nil)
		return 2
	}
	job := req.Job
	if _, err := applyLimits(req.Limits, job.Dir, nil); err != nil {
		reply(w, err, nil)
		return 1
	}
	t, err := save(context.Background(), job, req.MemoryLimit, req.Threads)
	err = hideErrorPaths(err, job.Dir, nil)
	reply(w, err, func(e *wire.Enc) error {
		t.EncodeSaved(e)
		return nil
	})
	return 0
}

// savedTable is the table a save job builds; a name of our own.
const savedTable = "dc_saved"

// save runs inside the worker, in the job's directory.
func save(ctx context.Context, job wire.SaveJob, memoryLimit int64, threads int) (*wire.IngestTable, error) {
	if err := os.Chdir(job.Dir); err != nil {
		return nil, fmt.Errorf("enter job directory: %w", err)
	}
	defs := make([]string, len(job.Columns))
	seen := map[string]bool{}
	for i, c := range job.Columns {
		if !wire.SaveTypes.MatchString(c.Type) {
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
	t := &wire.IngestTable{Output: fileOutput}
	err = withConn(ctx, db, func(conn mapping.Connection) error {
		if err := lockDown(conn); err != nil {
			return err
		}
		s := &ingestSession{conn: conn, name: job.Name, input: job.Spool, memoryLimit: memoryLimit}
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
	qs, err := lockDownStatements()
	if err != nil {
		return err
	}
	for _, q := range qs {
		if err := execOne(conn, q); err != nil {
			return fmt.Errorf("sandbox setup %q: %w", q, err)
		}
	}
	return nil
}

// lockDownStatements are the statements of [lockDown], which the save
// worker's appender connection runs too.
func lockDownStatements() ([]string, error) {
	dir, err := filepath.Abs(".")
	if err != nil {
		return nil, err
	}
	return []string{
		"SET GLOBAL allowed_directories = [" + datachat.QuoteLiteral(dir+string(filepath.Separator)) + "]",
		"SET GLOBAL enable_external_access = false",
		"SET GLOBAL lock_configuration = true",
	}, nil
}

// appendSpool creates the table, appends the spool's rows with DuckDB's
// appender, and writes the table as Parquet.
func appendSpool(ctx context.Context, job wire.SaveJob, defs []string, memoryLimit int64, threads int) error {
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
	qs, err := lockDownStatements()
	if err != nil {
		return err
	}
	for _, q := range append(qs, "CREATE TABLE "+datachat.QuoteIdent(savedTable)+" ("+strings.Join(defs, ", ")+")") {
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
		b, err := wire.ReadFrame(r)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			a.Close()
			return fmt.Errorf("read row %d: %w", n, err)
		}
		d := wire.NewDec(b)
		for i, col := range job.Columns {
			v := d.Value(0)
			if d.Err() != nil {
				a.Close()
				return fmt.Errorf("read row %d: %w", n, d.Err())
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
		if s, ok := wire.NumberText(v); ok {
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
	s, ok := wire.NumberText(v)
	if !ok {
		return nil, fmt.Errorf("a %T does not fit %s", v, typ)
	}
	bad := func() (driver.Value, error) { return nil, fmt.Errorf("%q does not fit %s", clipText(s), typ) }
	// fit is a parser's value, or bad() where it failed.
	fit := func(v driver.Value, err error) (driver.Value, error) {
		if err != nil {
			return bad()
		}
		return v, nil
	}
	switch {
	case typ == "BIGINT":
		return fit(strconv.ParseInt(s, 10, 64))
	case typ == "UBIGINT":
		return fit(strconv.ParseUint(s, 10, 64))
	case typ == "DOUBLE":
		f, ok := wire.ParseFloat(s)
		if !ok {
			return bad()
		}
		return f, nil
	case strings.HasPrefix(typ, "DECIMAL("):
		var w, sc int
		if _, err := fmt.Sscanf(typ, "DECIMAL(%d,%d)", &w, &sc); err != nil {
			return bad()
		}
		n, ok := wire.Unscaled(s, sc)
		if !ok {
			return bad()
		}
		return duckdbdriver.Decimal{Width: uint8(w), Scale: uint8(sc), Value: n}, nil
	case typ == "DATE":
		return fit(wire.ParseDate(s))
	case typ == "TIME":
		return fit(wire.ParseClock(s))
	case typ == "TIMESTAMP", typ == "TIMESTAMPTZ":
		return fit(wire.ParseTimestamp(s, typ == "TIMESTAMPTZ"))
	case typ == "UUID":
		u, err := uuid.Parse(s)
		if err != nil {
			return bad()
		}
		return duckdbdriver.UUID(u), nil
	case typ == "BLOB":
		return fit(base64.StdEncoding.DecodeString(s))
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
	case wire.Object:
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
