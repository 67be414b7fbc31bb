package duckdb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/duckdb/duckdb-go/v2/mapping"

	"datachat"
)

// Table is one dataset a query may read: a name and the path of its Parquet
// file (made absolute).
type Table struct {
	Name string
	Path string
}

// instance is one sandboxed DuckDB database: read-only views over exactly the
// Parquet files of one conversation, with the resource limits of [Options] and
// the configuration locked.
//
// It is built in two steps, because DuckDB's settings belong to the whole
// database: a small catalog file holding one view per table is written first,
// then reopened READ_ONLY (no CREATE, INSERT, ATTACH of in-memory databases…),
// the exact dataset files are put on allowed_paths, enable_external_access is
// turned off (no other file, no network, no INSTALL/LOAD from disk) and
// lock_configuration on (no SET, RESET or PRAGMA can undo any of it).
type instance struct {
	db     mapping.Database
	dir    string // holds the catalog file and the spill directory; removed on close
	tables []Table
}

func memSetting(bytes int64) string {
	return fmt.Sprintf("%dKiB", max(bytes/1024, 1))
}

func openInstance(tables []Table, o *Options) (_ *instance, err error) {
	dir, err := os.MkdirTemp(o.TempDir, "duckdb-")
	if err != nil {
		return nil, fmt.Errorf("create instance directory: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	catalog := filepath.Join(dir, "catalog.duckdb")
	if err := writeCatalog(catalog, tables); err != nil {
		return nil, err
	}

	var cfg mapping.Config
	if mapping.CreateConfig(&cfg) == mapping.StateError {
		return nil, errors.New("create duckdb config")
	}
	defer mapping.DestroyConfig(&cfg)
	settings := [][2]string{
		{"access_mode", "READ_ONLY"},
		{"threads", fmt.Sprint(o.Threads)},
		{"memory_limit", memSetting(o.MemoryLimit)},
		{"temp_directory", filepath.Join(dir, "spill")},
		{"max_temp_directory_size", memSetting(o.MaxTempBytes)},
		{"autoinstall_known_extensions", "false"},
		{"autoload_known_extensions", "false"},
		{"allow_community_extensions", "false"},
		{"allow_unsigned_extensions", "false"},
		{"allow_persistent_secrets", "false"},
	}
	for _, s := range settings {
		if mapping.SetConfig(cfg, s[0], s[1]) == mapping.StateError {
			return nil, fmt.Errorf("set duckdb option %s=%s", s[0], s[1])
		}
	}
	in := &instance{dir: dir, tables: tables}
	var msg string
	if mapping.OpenExt(catalog, &in.db, cfg, &msg) == mapping.StateError {
		mapping.Close(&in.db)
		return nil, fmt.Errorf("open duckdb: %s", msg)
	}
	defer func() {
		if err != nil {
			mapping.Close(&in.db)
		}
	}()

	// The sandbox proper. allowed_paths must be set while external access is
	// still on; the lock comes last.
	paths := make([]string, len(tables))
	for i, t := range tables {
		paths[i] = quoteLiteral(t.Path)
	}
	setup := []string{
		"SET GLOBAL parquet_metadata_cache = true", // an extension's option: not known at open
		"SET GLOBAL allowed_paths = [" + strings.Join(paths, ", ") + "]",
		"SET GLOBAL enable_external_access = false",
		"SET GLOBAL lock_configuration = true",
	}
	var conn mapping.Connection
	if mapping.Connect(in.db, &conn) == mapping.StateError {
		return nil, errors.New("connect to duckdb")
	}
	defer mapping.Disconnect(&conn)
	for _, q := range setup {
		if err := exec(conn, q); err != nil {
			return nil, fmt.Errorf("sandbox setup %q: %w", q, err)
		}
	}
	// Check the sandbox is in force before any query runs.
	v, err := scalarString(conn, "SELECT current_setting('enable_external_access')::VARCHAR || ',' || current_setting('lock_configuration')::VARCHAR")
	if err != nil || v != "false,true" {
		return nil, fmt.Errorf("sandbox settings not in force (%q): %v", v, err)
	}
	return in, nil
}

// writeCatalog writes a DuckDB file with one view per table.
func writeCatalog(path string, tables []Table) error {
	var cfg mapping.Config
	if mapping.CreateConfig(&cfg) == mapping.StateError {
		return errors.New("create duckdb config")
	}
	defer mapping.DestroyConfig(&cfg)
	for _, s := range [][2]string{
		{"threads", "1"},
		{"autoinstall_known_extensions", "false"},
		{"autoload_known_extensions", "false"},
	} {
		if mapping.SetConfig(cfg, s[0], s[1]) == mapping.StateError {
			return fmt.Errorf("set duckdb option %s", s[0])
		}
	}
	var db mapping.Database
	var msg string
	if mapping.OpenExt(path, &db, cfg, &msg) == mapping.StateError {
		mapping.Close(&db)
		return fmt.Errorf("create catalog: %s", msg)
	}
	defer mapping.Close(&db)
	var conn mapping.Connection
	if mapping.Connect(db, &conn) == mapping.StateError {
		return errors.New("connect to duckdb")
	}
	defer mapping.Disconnect(&conn)
	for _, t := range tables {
		q := fmt.Sprintf("CREATE VIEW %s AS SELECT * FROM read_parquet(%s)", QuoteIdent(t.Name), quoteLiteral(t.Path))
		if err := exec(conn, q); err != nil {
			return datachat.Errorf(datachat.EINVALID, "dataset %q cannot be read: %v", t.Name, err)
		}
	}
	return exec(conn, "CHECKPOINT")
}

func (in *instance) close() {
	mapping.Close(&in.db)
	os.RemoveAll(in.dir)
}

// exec runs a statement of our own and returns DuckDB's error, if any.
func exec(conn mapping.Connection, q string) error {
	var res mapping.Result
	defer mapping.DestroyResult(&res)
	if mapping.Query(conn, q, &res) == mapping.StateError {
		return errors.New(mapping.ResultError(&res))
	}
	return nil
}

// scalarString runs a query of our own returning one VARCHAR value.
func scalarString(conn mapping.Connection, q string) (string, error) {
	var res mapping.Result
	defer mapping.DestroyResult(&res)
	if mapping.Query(conn, q, &res) == mapping.StateError {
		return "", errors.New(mapping.ResultError(&res))
	}
	if mapping.ColumnCount(&res) != 1 || mapping.ColumnType(&res, 0) != mapping.TypeVarchar {
		return "", errors.New("want one VARCHAR column")
	}
	chunk := mapping.FetchChunk(res)
	if chunk.Ptr == nil {
		return "", errors.New("no rows")
	}
	defer mapping.DestroyDataChunk(&chunk)
	if mapping.DataChunkGetSize(chunk) < 1 {
		return "", errors.New("no rows")
	}
	v := (&decoder{id: mapping.TypeVarchar}).bind(mapping.DataChunkGetVector(chunk, 0))
	if !v.valid(0) {
		return "", errors.New("NULL")
	}
	return string(v.str(0)), nil
}

// withConn runs fn on a fresh connection of the instance (so no temporary
// object or per-connection setting outlives a query), interrupting DuckDB when
// ctx is done.
func (in *instance) withConn(ctx context.Context, fn func(conn mapping.Connection) error) error {
	var conn mapping.Connection
	if mapping.Connect(in.db, &conn) == mapping.StateError {
		return errors.New("connect to duckdb")
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		// DuckDB may clear an interrupt it received between two steps of a
		// query, so keep asserting it until the call returns.
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			mapping.Interrupt(conn)
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	err := fn(conn)
	close(done)
	<-stopped
	mapping.Disconnect(&conn)
	return err
}
