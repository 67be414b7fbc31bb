package duckdb

import (
	"context"
	"io"

	"datachat/internal/duckdb/wire"
	sqlworker "datachat/internal/duckdb/worker"
)

// Package worker runs inside the worker processes; importing it makes every
// binary that links this package able to serve as its own worker (its init
// turns the process into one when the server starts it so). What it also
// decides for the server's side is named here.

// Table is one dataset a query may read: a name and the path of its Parquet
// file (made absolute).
type Table = wire.Table

// Version is the version of the DuckDB library linked into this binary, as
// the library itself reports it (such as v1.5.5).
func Version() string { return sqlworker.Version() }

// SizeText writes a byte count for people: 512 MiB, 1.5 GiB.
func SizeText(n int64) string { return sqlworker.SizeText(n) }

// ContextReader returns a reader of r that stops reading, with ctx's error,
// once ctx ends: an upload's bytes are copied through it wherever they enter
// (the spool, decompression, transcoding).
func ContextReader(ctx context.Context, r io.Reader) io.Reader {
	return sqlworker.ContextReader(ctx, r)
}
