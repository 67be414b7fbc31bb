package sqlite

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"datachat"
)

// wantCondition checks that err is the EBUSY error of the condition kind, with
// a Retry-After, and that the driver's error is still in its chain.
func wantCondition(t *testing.T, what string, err error, kind error) {
	t.Helper()
	var c *datachat.Condition
	switch {
	case err == nil:
		t.Fatalf("%s: got no error, want %v", what, kind)
	case datachat.ErrorCode(err) != datachat.EBUSY || !errors.Is(err, kind) || !errors.As(err, &c):
		t.Fatalf("%s: got %v (code %s), want EBUSY with %v", what, err, datachat.ErrorCode(err), kind)
	case c.RetryAfter() <= 0 || c.Reason == "" || c.SuggestedAction == "":
		t.Errorf("%s: condition %+v lacks a Retry-After, a reason or a suggested action", what, c)
	case errorCode(err) == 0:
		t.Errorf("%s: the driver's error is not in the chain of %v", what, err)
	}
	if msg := datachat.ErrorMessage(err); strings.Contains(msg, "/") || strings.Contains(msg, "SQLITE") {
		t.Errorf("%s: message %q shows a path or the driver's detail", what, msg)
	}
}

// TestFullDatabaseIsNoSpace: SQLITE_FULL from a write is the server's full
// disk, not an internal error; constraint errors keep their meaning. The file
// is capped with max_page_count, which fails writes as a full disk does.
func TestFullDatabaseIsNoSpace(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "datachat.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	u, err := s.EnsureUser(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	_, hash, prefix := datachat.NewAPIKeySecret()
	if err := s.CreateAPIKey(ctx, &datachat.APIKey{UserID: u.ID, Hash: hash, Prefix: prefix}); err != nil {
		t.Fatal(err)
	}
	var pages int
	if err := s.write.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.write.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
		t.Fatal(err)
	}
	err = s.CreateConversation(ctx, &datachat.Conversation{UserID: u.ID, Title: strings.Repeat("x", 1<<20)})
	wantCondition(t, "CreateConversation on a full database", err, datachat.ErrNoSpace)
	if errorCode(err)&0xff != sqlite3.SQLITE_FULL {
		t.Errorf("got code %d, want SQLITE_FULL", errorCode(err))
	}

	// Reads go on, and a key still authenticates though its use cannot be
	// recorded: the user must be able to reach what to delete.
	if _, err := s.Conversations(ctx, u.ID); err != nil {
		t.Errorf("Conversations on a full database: %v", err)
	}
	if got, _, err := s.Authenticate(ctx, hash); err != nil || got.ID != u.ID {
		t.Errorf("Authenticate on a full database: got %v, %v; want alice", got, err)
	}
	// Not every failure is a condition.
	err = s.CreateConversation(ctx, &datachat.Conversation{UserID: "nobody", Title: "t"})
	if datachat.ErrorCode(err) != datachat.ENOTFOUND {
		t.Errorf("CreateConversation for a missing user: got %v, want ENOTFOUND", err)
	}
}

// TestLockedDatabaseIsUnavailable: a database another process keeps locked
// past busy_timeout is unavailable (503 with Retry-After), not broken.
func TestLockedDatabaseIsUnavailable(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "datachat.db")
	holder, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if err := holder.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err := holder.write.BeginTx(ctx, nil) // BEGIN IMMEDIATE: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()

	// A second pool with a short busy_timeout stands for the store of
	// another process: it waits that long, then gives up.
	db, err := openDB(path + "?_pragma=busy_timeout(50)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	_, err = db.ExecContext(ctx, `INSERT INTO users (id, name, created_at) VALUES ('u', 'u', '2026-01-01T00:00:00.000000Z')`)
	wantCondition(t, "a write while another connection holds the lock", err, datachat.ErrStoreUnavailable)
	if errorCode(err)&0xff != sqlite3.SQLITE_BUSY {
		t.Errorf("got code %d, want SQLITE_BUSY", errorCode(err))
	}
	t.Logf("gave up after %s: %v", time.Since(start).Round(time.Millisecond), err)
}

func TestClassifyCodes(t *testing.T) {
	cause := errors.New("driver error")
	for _, tc := range []struct {
		code int
		want error // nil: left as it is
	}{
		{sqlite3.SQLITE_FULL, datachat.ErrNoSpace},
		{sqlite3.SQLITE_BUSY, datachat.ErrStoreUnavailable},
		{sqlite3.SQLITE_BUSY_SNAPSHOT, datachat.ErrStoreUnavailable},
		{sqlite3.SQLITE_IOERR, datachat.ErrStoreUnavailable},
		{sqlite3.SQLITE_IOERR_WRITE, datachat.ErrStoreUnavailable},
		{sqlite3.SQLITE_IOERR_FSYNC, datachat.ErrStoreUnavailable},
		{sqlite3.SQLITE_IOERR_SHMMAP, datachat.ErrStoreUnavailable},
		{sqlite3.SQLITE_CANTOPEN, datachat.ErrStoreUnavailable},
		{sqlite3.SQLITE_PROTOCOL, datachat.ErrStoreUnavailable},
		{sqlite3.SQLITE_CONSTRAINT_UNIQUE, nil},
		{sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY, nil},
		{sqlite3.SQLITE_READONLY, nil},
		{sqlite3.SQLITE_CORRUPT, nil},
		{sqlite3.SQLITE_ERROR, nil},
	} {
		got := classifyCode(tc.code, cause)
		switch {
		case tc.want == nil && got != cause:
			t.Errorf("code %d: got %v, want the error unchanged", tc.code, got)
		case tc.want != nil && (!errors.Is(got, tc.want) || !errors.Is(got, cause) || datachat.ErrorCode(got) != datachat.EBUSY):
			t.Errorf("code %d: got %v, want EBUSY with %v", tc.code, got, tc.want)
		}
	}
}

// A connection keeps its statements prepared; the same statement run while
// its rows are still open (on the same connection, in one transaction) is
// prepared apart, and both read what they should, then and on later uses.
func TestCachedStatements(t *testing.T) {
	db, err := openDB(filepath.Join(t.TempDir(), "cache.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := t.Context()
	const q = `SELECT value FROM json_each(?) ORDER BY value`
	for round := range 3 {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		outer, err := tx.QueryContext(ctx, q, "[1,2,3]")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for outer.Next() {
			var v, w int
			if err := outer.Scan(&v); err != nil {
				t.Fatal(err)
			}
			if err := tx.QueryRowContext(ctx, q, fmt.Sprintf("[%d]", 10*v)).Scan(&w); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS t (v INTEGER)`); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%d:%d", v, w))
		}
		if err := outer.Err(); err != nil {
			t.Fatal(err)
		}
		outer.Close()
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if g, want := strings.Join(got, " "), "1:10 2:20 3:30"; g != want {
			t.Fatalf("round %d: got %q, want %q", round, g, want)
		}
	}
}
