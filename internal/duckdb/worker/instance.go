package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/duckdb/duckdb-go/v2/mapping"

	"datachat"
	"datachat/internal/duckdb/wire"
)

// instance is one sandboxed DuckDB database, inside a query worker: views
// over exactly the Parquet files of one conversation, with the resource
// limits of [Options] and the configuration locked.
//
// The worker works in its own directory, and everything DuckDB is told is
// relative to it, so no server path reaches a user: data/<table>.parquet is a
// link to the dataset's file, spill/ takes what does not fit in memory.
//
// The database is in memory: building it writes nothing but the links, so
// queries over existing datasets go on when the disk is full. Its views are
// created first; then the exact dataset files are put on allowed_paths,
// enable_external_access is turned off (no other file, no network, no
// INSTALL/LOAD from disk) and lock_configuration on (no SET, RESET or PRAGMA
// can undo any of it). Statements are checked against the instance's
// [policy] before they run (sandbox.go): only one SELECT (or a plain EXPLAIN
// of one) reaches DuckDB, so nothing can change the catalog — no CREATE,
// INSERT, DROP or ATTACH — though the database itself is writable.
type instance struct {
	db     mapping.Database
	tables []wire.Table
	policy *policy
	denied []string // what the catalog denies, as newPolicy takes it
}

func memSetting(bytes int64) string {
	return fmt.Sprintf("%dKiB", max(bytes/1024, 1))
}

var plainTableName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// linkName is the file name, under data/, by which the worker's DuckDB reads
// table i: the table's own name where it is a plain one.
func linkName(i int, t wire.Table) string {
	if plainTableName.MatchString(t.Name) {
		return "data/" + t.Name + ".parquet"
	}
	return fmt.Sprintf("data/table%d.parquet", i+1)
}

// openInstance builds the instance in root, the worker's working directory.
// denied are the functions the catalog denies (catalogDenied); nil reads them
// from this instance's catalog.
func openInstance(root string, tables []wire.Table, memoryLimit int64, threads int, maxTemp int64, denied []string) (_ *instance, err error) {
	if err := os.Chdir(root); err != nil {
		return nil, fmt.Errorf("enter worker directory: %w", err)
	}
	if err := os.Mkdir("data", 0o700); err != nil {
		return nil, noteWriteErr(fmt.Errorf("create data directory: %w", err))
	}
	links := make([]string, len(tables))
	for i, t := range tables {
		links[i] = linkName(i, t)
		if err := os.Symlink(linkTarget(root, t.Path), links[i]); err != nil {
			return nil, noteWriteErr(fmt.Errorf("link dataset %q: %w", t.Name, err))
		}
	}

	db, err := openDatabase("", [][2]string{
		{"threads", fmt.Sprint(threads)},
		{"memory_limit", memSetting(memoryLimit)},
		{"temp_directory", "spill"},
		{"max_temp_directory_size", memSetting(maxTemp)},
	})
	if err != nil {
		return nil, err
	}
	in := &instance{db: db, tables: tables}
	defer func() {
		if err != nil {
			in.close()
		}
	}()

	// The sandbox proper. allowed_paths must be set while external access is
	// still on; the lock comes last.
	paths := make([]string, len(links))
	for i, l := range links {
		paths[i] = datachat.QuoteLiteral(l)
	}
	err = in.withConn(context.Background(), func(conn mapping.Connection) error {
		for i, t := range tables {
			q := fmt.Sprintf("CREATE VIEW %s AS SELECT * FROM read_parquet(%s)", datachat.QuoteIdent(t.Name), datachat.QuoteLiteral(links[i]))
			if err := execOne(conn, q); err != nil {
				return datachat.Errorf(datachat.EINVALID, "dataset %q cannot be read: %v", t.Name, err)
			}
		}
		for _, q := range []string{
			"SET GLOBAL parquet_metadata_cache = true", // an extension's option: not known at open
			"SET GLOBAL allowed_paths = [" + strings.Join(paths, ", ") + "]",
			"SET GLOBAL enable_external_access = false",
			"SET GLOBAL lock_configuration = true",
		} {
			if err := execOne(conn, q); err != nil {
				return fmt.Errorf("sandbox setup %q: %w", q, err)
			}
		}
		// Check the sandbox is in force before any query runs.
		v, err := scalarString(conn, "SELECT current_setting('enable_external_access')::VARCHAR || ',' || current_setting('lock_configuration')::VARCHAR")
		if err != nil || v != "false,true" {
			return fmt.Errorf("sandbox settings not in force (%q): %v", v, err)
		}
		if denied == nil {
			if denied, err = catalogDenied(conn); err != nil {
				return err
			}
		}
		in.policy = newPolicy(denied, tables)
		in.denied = denied
		return nil
	})
	if err != nil {
		return nil, err
	}
	return in, nil
}

// openDatabase opens a DuckDB database with the given settings, and the
// settings every datachat DuckDB has: no extension is installed or loaded
// from anywhere, no secret is kept.
func openDatabase(path string, settings [][2]string) (mapping.Database, error) {
	var db mapping.Database
	var cfg mapping.Config
	if mapping.CreateConfig(&cfg) == mapping.StateError {
		return db, errors.New("create duckdb config")
	}
	defer mapping.DestroyConfig(&cfg)
	settings = append(settings, [][2]string{
		{"autoinstall_known_extensions", "false"},
		{"autoload_known_extensions", "false"},
		{"allow_community_extensions", "false"},
		{"allow_unsigned_extensions", "false"},
		{"allow_persistent_secrets", "false"},
	}...)
	for _, s := range settings {
		if mapping.SetConfig(cfg, s[0], s[1]) == mapping.StateError {
			return db, fmt.Errorf("set duckdb option %s=%s", s[0], s[1])
		}
	}
	var msg string
	if mapping.OpenExt(path, &db, cfg, &msg) == mapping.StateError {
		mapping.Close(&db)
		return db, fmt.Errorf("open duckdb: %s", msg)
	}
	return db, nil
}

// linkTarget is what the link to a dataset file holds: the path relative to
// the link when that is shorter, which a file system stores in the link's
// inode (ext4 up to 60 bytes), taking no block of a full disk.
func linkTarget(root, path string) string {
	if rel, err := filepath.Rel(filepath.Join(root, "data"), path); err == nil && len(rel) < len(path) {
		return rel
	}
	return path
}

func (in *instance) close() {
	mapping.Close(&in.db)
}

// execOne runs one statement of our own: it refuses a text that is not
// exactly one statement (or carries a NUL, which would cut it short on its
// way to C), so nothing a value brought in can add a second.
func execOne(conn mapping.Connection, q string) error {
	if strings.IndexByte(q, 0) >= 0 {
		return errors.New("a statement of our own contains a NUL byte")
	}
	var ext mapping.ExtractedStatements
	n := mapping.ExtractStatements(conn, q, &ext)
	defer mapping.DestroyExtracted(&ext)
	if n != 1 {
		if msg := mapping.ExtractStatementsError(ext); msg != "" {
			return errors.New(msg)
		}
		return fmt.Errorf("a statement of our own parsed as %d statements", n)
	}
	var stmt mapping.PreparedStatement
	defer mapping.DestroyPrepare(&stmt)
	if mapping.PrepareExtractedStatement(conn, ext, 0, &stmt) == mapping.StateError {
		return errors.New(mapping.PrepareError(stmt))
	}
	var res mapping.Result
	defer mapping.DestroyResult(&res)
	if mapping.ExecutePrepared(stmt, &res) == mapping.StateError {
		return newDuckError(mapping.ResultErrorType(&res), mapping.ResultError(&res))
	}
	return nil
}

// duckError is an error DuckDB returned for a statement of our own.
type duckError struct {
	typ mapping.ErrorType
	msg string
}

func (e *duckError) Error() string { return e.msg }

// scalarString runs a query of our own returning one VARCHAR value.
func scalarString(conn mapping.Connection, q string) (string, error) {
	res, err := queryAll(conn, q, 1, nil)
	if err != nil {
		return "", err
	}
	if len(res.Columns) != 1 || len(res.Rows) != 1 {
		return "", errors.New("want one value")
	}
	s, ok := res.Rows[0][0].(string)
	if !ok {
		return "", fmt.Errorf("want text, got %T", res.Rows[0][0])
	}
	return s, nil
}

// withConn runs fn on a fresh connection of the instance (so no temporary
// object or per-connection setting outlives a query), interrupting DuckDB when
// ctx is done.
func (in *instance) withConn(ctx context.Context, fn func(conn mapping.Connection) error) error {
	return withConn(ctx, in.db, fn)
}

func withConn(ctx context.Context, db mapping.Database, fn func(conn mapping.Connection) error) error {
	var conn mapping.Connection
	if mapping.Connect(db, &conn) == mapping.StateError {
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

// Version is the version of the DuckDB library linked into this binary, as
// the library itself reports it (such as v1.5.5).
func Version() string { return mapping.LibraryVersion() }
