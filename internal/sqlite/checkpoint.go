package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// The store's writer does not checkpoint the WAL. SQLite's automatic
// checkpoint runs inside the commit that takes the WAL past 1,000 pages: it
// copies them into the database file and syncs it while the commit still
// holds the writer, and under a burst of long answers every turn's BeginTurn
// waited behind it, 10-30 ms a commit (BENCHMARKS, "Stalled clients"). A
// checkpointer copies them instead, on a reader connection beside the
// writer: a PASSIVE checkpoint takes neither the write lock nor waits for
// readers, and a writer restarts the WAL from its start once a checkpoint
// has copied all of it, as with the automatic one. It runs after the store
// is written, at most once every checkpointEvery; when the store closes,
// SQLite checkpoints what is left.

// checkpointEvery is the least time between two checkpoints: the WAL holds
// at most what the store writes in that time beyond what readers still
// read.
const checkpointEvery = 200 * time.Millisecond

type checkpointer struct {
	db    *sql.DB       // a reader pool
	wrote chan struct{} // holds a token once the store was written
	quit  chan struct{} // closed by close
	stop  sync.Once
	done  chan struct{} // closed when the loop has ended

	ran func(frames, copied int, err error)
}

// newCheckpointer starts a checkpointer on db; ran, when not nil, is called
// with each checkpoint's outcome.
func newCheckpointer(db *sql.DB, ran func(frames, copied int, err error)) *checkpointer {
	c := &checkpointer{db: db, wrote: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}), ran: ran}
	go c.loop()
	return c
}

// written says the store was written: a checkpoint is due.
func (c *checkpointer) written() {
	select {
	case c.wrote <- struct{}{}:
	default:
	}
}

func (c *checkpointer) loop() {
	defer close(c.done)
	for {
		select {
		case <-c.quit:
			return
		case <-c.wrote:
		}
		frames, copied, err := c.checkpoint()
		if c.ran != nil {
			c.ran(frames, copied, err)
		}
		select {
		case <-c.quit:
			return
		case <-time.After(checkpointEvery):
		}
	}
}

// checkpoint copies into the database file what of the WAL no reader still
// needs, and returns the WAL's frames and how many of them are copied. A
// failure (a full disk, another process's checkpoint) leaves the WAL to the
// next one.
func (c *checkpointer) checkpoint() (frames, copied int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), BusyTimeout)
	defer cancel()
	var busy int
	err = c.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied)
	return frames, copied, err
}

// close stops the checkpointer, after the checkpoint it is running.
func (c *checkpointer) close() {
	c.stop.Do(func() { close(c.quit) })
	<-c.done
}

// signaling is the writer pool, saying after each statement that the store
// was written.
type signaling struct {
	*sql.DB
	c *checkpointer
}

func (s signaling) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	defer s.c.written()
	return s.DB.ExecContext(ctx, query, args...)
}

func (s signaling) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	defer s.c.written()
	return s.DB.QueryContext(ctx, query, args...)
}

func (s signaling) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	defer s.c.written()
	return s.DB.QueryRowContext(ctx, query, args...)
}
