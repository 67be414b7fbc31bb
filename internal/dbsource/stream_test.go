package dbsource_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"datachat"
	"datachat/internal/dbsource"
)

// rowsSink keeps what a stream gives; it fails with err after failAfter
// rows when err is set.
type rowsSink struct {
	cols      []datachat.Column
	rows      [][]any
	failAfter int
	err       error
}

func (s *rowsSink) Columns(c []datachat.Column) error { s.cols = c; return nil }

func (s *rowsSink) Row(v []any) error {
	if s.err != nil && len(s.rows) == s.failAfter {
		return s.err
	}
	s.rows = append(s.rows, append([]any(nil), v...))
	return nil
}

// TestStream: a streamed query (save_as) goes through the same checks as a
// query — a write, a table not allowed are refused before anything runs —
// gives the same values as Query for the same statement (every type of
// alltypes), is cut on the server at its own row cap (past Query's 1000),
// and stops at a sink's error, returned as is. On PostgreSQL and MariaDB.
func TestStream(t *testing.T) {
	t.Run("PostgreSQL", func(t *testing.T) {
		f := pgSetup(t)
		testStream(t, openPg(t, f, dbsource.Options{}), dbsource.KindPostgres, "public.big", "public.alltypes", "secret.creds")
	})
	t.Run("MariaDB", func(t *testing.T) {
		f := mySetup(t)
		testStream(t, openMy(t, f, dbsource.Options{}), dbsource.KindMySQL, f.db+".big", f.db+".alltypes", "mysql.user")
	})
}

func testStream(t *testing.T, db *dbsource.DB, kind, big, alltypes, forbidden string) {
	ctx := context.Background()
	var n int64
	if r, err := db.Query(ctx, "SELECT count(*) FROM "+big); err != nil {
		t.Fatal(err)
	} else {
		n = r.Rows[0][0].(int64)
	}
	if n <= 1000 {
		t.Fatalf("%s has %d rows; the test needs more than Query's cap", big, n)
	}
	for _, tc := range []struct {
		max       int
		rows      int64
		truncated bool
	}{{int(n) - 1, n - 1, true}, {int(n), n, false}, {int(n) + 10, n, false}} {
		s := &rowsSink{}
		res, err := db.Stream(ctx, "SELECT id FROM "+big+" ORDER BY id", tc.max, s)
		if err != nil {
			t.Fatal(err)
		}
		if res.Rows != tc.rows || res.Truncated != tc.truncated || int64(len(s.rows)) != tc.rows {
			t.Errorf("cap %d: %d rows (%d given), truncated %v; want %d, %v", tc.max, res.Rows, len(s.rows), res.Truncated, tc.rows, tc.truncated)
		}
		if len(s.rows) > 0 && fmt.Sprint(s.rows[len(s.rows)-1][0]) != fmt.Sprint(len(s.rows)) {
			t.Errorf("cap %d: last row %v, want id %d", tc.max, s.rows[len(s.rows)-1], len(s.rows))
		}
	}
	// The same values as Query's, type by type.
	q, err := db.Query(ctx, "SELECT * FROM "+alltypes)
	if err != nil {
		t.Fatal(err)
	}
	s := &rowsSink{}
	if _, err := db.Stream(ctx, "SELECT * FROM "+alltypes, 10, s); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.rows, q.Rows) {
		t.Errorf("streamed rows\n%#v\nwant Query's\n%#v", s.rows, q.Rows)
	}
	for i, c := range s.cols {
		if c.Name != q.Columns[i].Name || c.Type != q.Columns[i].Type {
			t.Errorf("streamed column %d %+v, want Query's %+v", i, c, q.Columns[i])
		}
	}
	// Refused as Query refuses, before anything runs.
	for _, sql := range []string{"DELETE FROM " + big, "SELECT * FROM " + forbidden} {
		s := &rowsSink{}
		_, err := db.Stream(ctx, sql, 10, s)
		var qe *datachat.QueryError
		if !errors.As(err, &qe) || s.cols != nil {
			t.Errorf("%s: %v, columns given %v; want refused before it runs", sql, err, s.cols)
		}
	}
	// A sink's error stops the query and comes back as is.
	boom := errors.New("disk full")
	s = &rowsSink{failAfter: 3, err: boom}
	if _, err := db.Stream(ctx, "SELECT id FROM "+big, int(n), s); !errors.Is(err, boom) || len(s.rows) != 3 {
		t.Errorf("sink failing after 3 rows: %v, %d rows; want its error after 3", err, len(s.rows))
	}
	// The session is usable after: nothing was left half-read.
	if r, err := db.Query(ctx, "SELECT count(*) FROM "+big); err != nil || r.Rows[0][0] != n {
		t.Errorf("a query after the stopped stream: %v %v", r, err)
	}
	// Hostile column names come through as the engine names them.
	id := func(s string) string { return dbsource.QuoteIdent(kind, s) }
	s = &rowsSink{}
	if _, err := db.Stream(ctx, "SELECT 1 AS "+id(`x"); DROP TABLE t; --`)+", 2 AS "+id("X\"); DROP TABLE t; --")+", 'v''; DROP' AS "+id("`q`"), 10, s); err != nil {
		t.Fatal(err)
	}
	if len(s.cols) != 3 || s.cols[0].Name != `x"); DROP TABLE t; --` || s.cols[2].Name != "`q`" || len(s.rows) != 1 || s.rows[0][2] != "v'; DROP" {
		t.Errorf("hostile names: %+v %v", s.cols, s.rows)
	}
}
