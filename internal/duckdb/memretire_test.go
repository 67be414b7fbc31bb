package duckdb

import (
	"context"
	"errors"
	"testing"
	"time"

	"datachat"
)

// TestWorkerReplacedAfterMemoryError: a query DuckDB stops for memory fails
// alone, and the conversation's next query runs in a new worker with all of
// its memory (the old one may keep what its allocator held: in CI a
// follow-up in the same worker died of bad_alloc). A query that fails for
// another reason keeps its worker.
func TestWorkerReplacedAfterMemoryError(t *testing.T) {
	e, tables, check := sandboxEngine(t, Options{Timeout: 10 * time.Second, MemoryLimit: 256 << 20})
	ctx := context.Background()
	pid := startWorker(t, e, tables, "conv")

	_, err := e.Query(ctx, "conv", tables, "SELECT no_such_column FROM t")
	var qe *datachat.QueryError
	if !errors.As(err, &qe) || qe.Kind == datachat.KindMemory {
		t.Fatalf("got %v, want a query error that is not about memory", err)
	}
	checkWorkerKept(t, e, tables, "conv", pid)

	_, err = e.Query(ctx, "conv", tables, "SELECT length(concat(repeat('x', 1000000000), repeat('x', 1000000000)))")
	if !errors.As(err, &qe) || qe.Kind != datachat.KindMemory {
		t.Fatalf("got %v, want the query stopped for memory", err)
	}
	check(t)
	if p := workerPid(e, "conv"); p == pid || p == 0 {
		t.Errorf("the worker that ran out of memory still serves the conversation (%d, was %d)", p, pid)
	}
}
