package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// committerOn opens the writer pool of a fresh database with a table t(k)
// and a committer on it which says on c.queued's channel each time a
// transaction waits, and reports the size of each batch on the returned
// channel.
func committerOn(t *testing.T) (*committer, *sql.DB, chan int) {
	t.Helper()
	write, read, err := Pools(t.Context(), filepath.Join(t.TempDir(), "commit.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { write.Close(); read.Close() })
	if _, err := write.ExecContext(t.Context(), `CREATE TABLE t (k TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	c := newCommitter(write, nil)
	sizes, queued := make(chan int, 4096), make(chan struct{}, 4096)
	c.ran = func(n int) { sizes <- n }
	c.queued = func() { queued <- struct{}{} }
	waiting[c] = queued
	t.Cleanup(c.close)
	return c, read, sizes
}

func insert(k string) func(ctx context.Context, tx *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO t (k) VALUES (?)`, k)
		return err
	}
}

func keys(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT k FROM t ORDER BY k`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ks []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k)
	}
	return ks
}

// wantKeys checks the table's rows.
func wantKeys(t *testing.T, db *sql.DB, want ...string) {
	t.Helper()
	if got := keys(t, db); !slices.Equal(got, want) {
		t.Errorf("rows: got %v, want %v", got, want)
	}
}

// hold starts a transaction that holds the writer until the returned
// function is called, and waits until it runs.
func hold(t *testing.T, c *committer, sizes <-chan int, k string) (release func() error) {
	t.Helper()
	running, free := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- c.run(context.Background(), func(ctx context.Context, tx *sql.Tx) error {
			close(running)
			<-free
			return insert(k)(ctx, tx)
		})
	}()
	<-running
	<-waiting[c]
	<-sizes // a batch of its own
	return func() error { close(free); return <-done }
}

// waiting is each test committer's channel of waiting transactions; set
// before the committer runs anything, read only by the test's goroutine.
var waiting = map[*committer]chan struct{}{}

// queue runs fns through c, each from its own goroutine, and returns once
// every one waits for the writer; wait gives their outcomes in order.
func queue(c *committer, ctxs []context.Context, fns ...func(ctx context.Context, tx *sql.Tx) error) (wait func() []error) {
	errs := make([]error, len(fns))
	var done sync.WaitGroup
	for i, fn := range fns {
		ctx := context.Background()
		if ctxs != nil {
			ctx = ctxs[i]
		}
		done.Go(func() { errs[i] = c.run(ctx, fn) })
	}
	for range fns {
		<-waiting[c]
	}
	return func() []error { done.Wait(); return errs }
}

// TestCommitterBatches: transactions that wait together commit in one batch,
// each failing one undone alone — its own error, a constraint violation —
// and the others written.
func TestCommitterBatches(t *testing.T) {
	c, read, sizes := committerOn(t)
	release := hold(t, c, sizes, "a")
	mine := errors.New("mine")
	var fns []func(ctx context.Context, tx *sql.Tx) error
	for i := range 10 {
		k := fmt.Sprintf("k%d", i)
		switch i {
		case 3: // writes, then fails: its row must not stay
			fns = append(fns, func(ctx context.Context, tx *sql.Tx) error {
				if err := insert(k)(ctx, tx); err != nil {
					return err
				}
				return mine
			})
		case 5: // violates the key of the held transaction's row
			fns = append(fns, insert("a"))
		case 7: // writes a row, then violates its key
			fns = append(fns, func(ctx context.Context, tx *sql.Tx) error {
				if err := insert(k)(ctx, tx); err != nil {
					return err
				}
				return insert(k)(ctx, tx)
			})
		default:
			fns = append(fns, insert(k))
		}
	}
	wait := queue(c, nil, fns...)
	if err := release(); err != nil {
		t.Fatalf("held transaction: %v", err)
	}
	errs := wait()
	if n := <-sizes; n != 10 {
		t.Errorf("batch of %d, want the 10 that waited together", n)
	}
	for i, err := range errs {
		switch i {
		case 3:
			if !errors.Is(err, mine) {
				t.Errorf("transaction 3: got %v, want its own error", err)
			}
		case 5, 7:
			if err == nil {
				t.Errorf("transaction %d: got nil, want the key's violation", i)
			}
		default:
			if err != nil {
				t.Errorf("transaction %d: %v", i, err)
			}
		}
	}
	want := []string{"a", "k0", "k1", "k2", "k4", "k6", "k8", "k9"} // not k3, k5 or k7
	wantKeys(t, read, want...)
}

// TestCommitterWithdrawn: a caller that gives up while its transaction waits
// leaves without it, and it never runs; one that gives up while it runs in a
// batch gets its outcome, and the batch is not interrupted.
func TestCommitterWithdrawn(t *testing.T) {
	c, read, sizes := committerOn(t)
	release := hold(t, c, sizes, "a")
	gone, cancelGone := context.WithCancel(context.Background())
	goneErr := make(chan error, 1)
	go func() { goneErr <- c.run(gone, insert("gone")) }()
	<-waiting[c]
	cancelGone()
	// It leaves at once, the writer still held.
	if err := <-goneErr; !errors.Is(err, context.Canceled) {
		t.Errorf("withdrawn: got %v, want context.Canceled", err)
	}
	late, cancelLate := context.WithCancel(context.Background())
	defer cancelLate()
	wait := queue(c, []context.Context{context.Background(), late},
		insert("b"),
		func(ctx context.Context, tx *sql.Tx) error {
			cancelLate() // its caller gives up while it runs
			if err := insert("late1")(ctx, tx); err != nil {
				return err
			}
			return insert("late2")(ctx, tx)
		})
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if all := wait(); all[0] != nil || all[1] != nil {
		t.Errorf("the others: got %v and %v, want both written", all[0], all[1])
	}
	if n := <-sizes; n != 2 {
		t.Errorf("batch of %d, want 2 (the withdrawn one left)", n)
	}
	want := []string{"a", "b", "late1", "late2"}
	wantKeys(t, read, want...)
}

// TestCommitterWholeBatchFails: when a transaction's failure ends SQLite's
// transaction (as a full disk or an I/O error does) nothing of the batch is
// written and every caller in it is told.
func TestCommitterWholeBatchFails(t *testing.T) {
	c, read, sizes := committerOn(t)
	release := hold(t, c, sizes, "a")
	boom := errors.New("boom")
	wait := queue(c, nil,
		insert("b"),
		func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `ROLLBACK`); err != nil {
				return err
			}
			return boom
		},
		insert("c"))
	if err := release(); err != nil {
		t.Fatal(err)
	}
	for i, err := range wait() {
		if err == nil {
			t.Errorf("transaction %d: got nil, want the batch's failure", i)
		}
	}
	if n := <-sizes; n != 3 {
		t.Errorf("batch of %d, want 3", n)
	}
	if got := keys(t, read); !slices.Equal(got, []string{"a"}) {
		t.Errorf("rows: got %v, want only the held one's", got)
	}
	// The writer works on after it.
	if err := c.run(t.Context(), insert("d")); err != nil {
		t.Fatalf("after the failed batch: %v", err)
	}
}

// TestCommitterAlone: a transaction that waits alone runs under its
// caller's context, so cancelling it interrupts it as before.
func TestCommitterAlone(t *testing.T) {
	c, read, _ := committerOn(t)
	ctx, cancel := context.WithCancel(t.Context())
	err := c.run(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := insert("x")(ctx, tx); err != nil {
			return err
		}
		cancel()
		return insert("y")(ctx, tx)
	})
	if err == nil {
		t.Fatal("got nil, want the cancelled context's failure")
	}
	if got := keys(t, read); len(got) != 0 {
		t.Errorf("rows: got %v, want none", got)
	}
}

// TestCommitterClosed: writes after close, and writes queued as it closes,
// are refused; what was running finishes first.
func TestCommitterClosed(t *testing.T) {
	c, read, sizes := committerOn(t)
	release := hold(t, c, sizes, "a")
	wait := queue(c, nil, insert("b"), insert("c"))
	closed := make(chan struct{})
	go func() { c.close(); close(closed) }()
	if err := release(); err != nil {
		t.Fatalf("running transaction: %v", err)
	}
	<-closed
	for i, err := range wait() {
		// Queued before close: each either ran (the loop took it first) or
		// was refused, never lost.
		if err != nil && !errors.Is(err, errClosed) {
			t.Errorf("queued %d: %v", i, err)
		}
	}
	if err := c.run(t.Context(), insert("z")); !errors.Is(err, errClosed) {
		t.Errorf("after close: got %v, want errClosed", err)
	}
	if got := keys(t, read); slices.Contains(got, "z") || !slices.Contains(got, "a") {
		t.Errorf("rows: %v", got)
	}
	c.close() // twice: no panic
}

// TestCommitterConcurrent: many writers at once, some failing, under -race:
// exactly the rows of the transactions reported written are there.
func TestCommitterConcurrent(t *testing.T) {
	c, read, _ := committerOn(t)
	const writers, each = 40, 25
	var mu sync.Mutex
	var written []string
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				k := fmt.Sprintf("w%02d-%02d", w, i)
				fail := (w+i)%7 == 0
				err := c.run(context.Background(), func(ctx context.Context, tx *sql.Tx) error {
					if err := insert(k)(ctx, tx); err != nil {
						return err
					}
					if fail {
						return errors.New("no")
					}
					return nil
				})
				if (err != nil) != fail {
					t.Errorf("%s: got %v, want failure %v", k, err, fail)
				}
				if err == nil {
					mu.Lock()
					written = append(written, k)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	slices.Sort(written)
	if got := keys(t, read); !slices.Equal(got, written) {
		t.Errorf("rows: %d, want the %d reported written", len(got), len(written))
	}
}

// TestCommitterPanic: a transaction function that panics, alone or in a
// batch, panics in its caller's goroutine, is rolled back, and leaves the
// writer and the batch's others working.
func TestCommitterPanic(t *testing.T) {
	c, read, sizes := committerOn(t)
	panics := func(ctx context.Context, tx *sql.Tx) error {
		if err := insert("p")(ctx, tx); err != nil {
			return err
		}
		panic("kaboom")
	}
	recovered := func(fn func()) (v any) {
		defer func() { v = recover() }()
		fn()
		return nil
	}
	if v := recovered(func() { c.run(t.Context(), panics) }); v != "kaboom" {
		t.Errorf("alone: recovered %v, want kaboom", v)
	}
	<-sizes
	<-waiting[c]
	release := hold(t, c, sizes, "a")
	var got any
	wait := queue(c, nil, insert("b"), func(ctx context.Context, tx *sql.Tx) error {
		return nil
	})
	caught := make(chan any, 1)
	go func() {
		caught <- recovered(func() { c.run(context.Background(), panics) })
	}()
	<-waiting[c]
	if err := release(); err != nil {
		t.Fatal(err)
	}
	got = <-caught
	if got != "kaboom" {
		t.Errorf("in a batch: recovered %v, want kaboom", got)
	}
	for i, err := range wait() {
		if err != nil {
			t.Errorf("batch's transaction %d: %v", i, err)
		}
	}
	if n := <-sizes; n != 3 {
		t.Errorf("batch of %d, want 3", n)
	}
	if got := keys(t, read); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("rows: got %v, want a and b (nothing of the panicking ones)", got)
	}
}
