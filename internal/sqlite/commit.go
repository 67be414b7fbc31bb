package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// A committer runs the store's write transactions on the writer connection,
// several in one SQLite transaction when they queue together (group commit).
//
// SQLite has one writer, so write transactions wait for each other anyway;
// what a transaction costs beyond its statements is BEGIN IMMEDIATE's lock,
// the commit's WAL frames and the WAL index, and under load (hundreds of
// chat turns starting, streaming and ending at once) that is most of it.
// So the committer takes every transaction waiting when the last one ends
// and runs them in one transaction, each inside its own savepoint: a
// transaction that fails is rolled back to its savepoint alone, and the
// others commit together. A transaction that waits alone runs as before,
// in a transaction of its own under its caller's context.
//
// Run in a batch, a transaction's statements are not interrupted by its
// caller's context (an interrupted write rolls back SQLite's whole
// transaction, the others' work with it); a caller that gives up before its
// transaction has started leaves without it running. When the batch's
// transaction ends in a way a savepoint cannot undo — its COMMIT fails, or a
// statement's failure (a full disk, an I/O error) rolled the whole
// transaction back — every transaction in it fails with that error and none
// of them is written.
type committer struct {
	db   *sql.DB
	reqs chan *writeReq // buffered: what waits for the writer
	quit chan struct{}  // closed by close
	stop sync.Once
	done chan struct{} // closed when the loop has answered all it took

	// Tests' view: queued is called once a transaction is waiting, ran with
	// the size of each batch run.
	queued func()
	ran    func(n int)

	wrote func()
}

// maxBatch bounds the transactions one batch runs: a batch holds the writer
// for all of them.
const maxBatch = 64

// writeReq is one write transaction waiting for the committer.
type writeReq struct {
	ctx   context.Context
	fn    func(ctx context.Context, tx *sql.Tx) error
	state atomic.Int32 // pending, running or withdrawn
	err   chan error   // the outcome, once running
}

const (
	pending int32 = iota
	running
	withdrawn
)

// newCommitter starts a committer on db; wrote, when not nil, is called
// after each batch.
func newCommitter(db *sql.DB, wrote func()) *committer {
	c := &committer{db: db, reqs: make(chan *writeReq, maxBatch), quit: make(chan struct{}), done: make(chan struct{}), wrote: wrote}
	go c.loop()
	return c
}

// errClosed answers a write after [Store.Close].
var errClosed = errors.New("the store is closed")

// run runs fn in a write transaction, committed when fn returns nil.
func (c *committer) run(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	r := &writeReq{ctx: ctx, fn: fn, err: make(chan error, 1)}
	select {
	case <-c.quit:
		return errClosed
	default:
	}
	select {
	case c.reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.quit:
		return errClosed
	}
	if c.queued != nil {
		c.queued()
	}
	var why error
	select {
	case err := <-r.err:
		return outcome(err)
	case <-ctx.Done():
		why = ctx.Err()
	case <-c.done:
		// Queued as the store closed, after the loop's last look.
		why = errClosed
	}
	if r.state.CompareAndSwap(pending, withdrawn) {
		return why
	}
	// Started: its outcome is on its way.
	return outcome(<-r.err)
}

// fnPanic is a transaction function's panic, carried to its caller.
type fnPanic struct{ v any }

func (p fnPanic) Error() string { return fmt.Sprint("panic in a write transaction: ", p.v) }

// call calls fn, its panic returned as an error: the committer's goroutine
// must not die of it, and the transaction is rolled back (to its savepoint
// in a batch).
func call(fn func(ctx context.Context, tx *sql.Tx) error, ctx context.Context, tx *sql.Tx) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fnPanic{v}
		}
	}()
	return fn(ctx, tx)
}

// outcome is a transaction's outcome for its caller: its function's panic
// panics again, in the caller's goroutine, as it did before the committer.
func outcome(err error) error {
	if p, ok := err.(fnPanic); ok {
		panic(p.v)
	}
	return err
}

// close stops the committer once the transactions it has taken are done.
func (c *committer) close() {
	c.stop.Do(func() { close(c.quit) })
	<-c.done
}

func (c *committer) loop() {
	defer close(c.done)
	batch := make([]*writeReq, 0, maxBatch)
	for {
		select {
		case r := <-c.reqs:
			batch = append(batch[:0], r)
		case <-c.quit:
			c.refuse()
			return
		}
	more:
		for len(batch) < maxBatch {
			select {
			case r := <-c.reqs:
				batch = append(batch, r)
			default:
				break more
			}
		}
		c.commit(batch)
		clear(batch)
		if c.wrote != nil {
			c.wrote()
		}
	}
}

// refuse answers what is still queued once the store closes.
func (c *committer) refuse() {
	for {
		select {
		case r := <-c.reqs:
			if r.state.CompareAndSwap(pending, running) {
				r.err <- errClosed
			}
		default:
			return
		}
	}
}

// commit runs the batch's transactions that are still wanted.
func (c *committer) commit(batch []*writeReq) {
	n := 0
	for _, r := range batch {
		if r.state.CompareAndSwap(pending, running) {
			batch[n] = r
			n++
		}
	}
	batch = batch[:n]
	if c.ran != nil && n > 0 {
		c.ran(n)
	}
	switch len(batch) {
	case 0:
		return
	case 1:
		r := batch[0]
		r.err <- inTx(r.ctx, c.db, func(tx *sql.Tx) error { return call(r.fn, r.ctx, tx) })
		return
	}
	errs, err := c.together(batch)
	for i, r := range batch {
		if err != nil {
			r.err <- err
		} else {
			r.err <- errs[i]
		}
	}
}

// together runs the batch in one transaction, each in a savepoint. It
// returns each one's own error, or one error for all when the transaction
// itself failed and nothing was written.
func (c *committer) together(batch []*writeReq) ([]error, error) {
	// Not the callers' contexts: database/sql rolls a transaction back when
	// the context it began with ends.
	ctx := context.Background()
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	errs := make([]error, len(batch))
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		if _, err := tx.ExecContext(ctx, "SAVEPOINT w"); err != nil {
			_ = tx.Rollback()
			return nil, fmt.Errorf("savepoint: %w", err)
		}
		if errs[i] = call(r.fn, context.WithoutCancel(r.ctx), tx); errs[i] != nil {
			// A failure that ended SQLite's transaction (a full disk, an
			// I/O error) leaves no savepoint to return to: everything in
			// the batch is undone, and each is told why.
			if _, err := tx.ExecContext(ctx, "ROLLBACK TO w"); err != nil {
				_ = tx.Rollback()
				return nil, errs[i]
			}
		}
		if _, err := tx.ExecContext(ctx, "RELEASE w"); err != nil {
			_ = tx.Rollback()
			return nil, fmt.Errorf("release savepoint: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return errs, nil
}
