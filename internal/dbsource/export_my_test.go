package dbsource

import (
	"context"
	"time"
)

// MyAdvanceClock moves db's clock d ahead of the wall clock, so that a test
// can pass the role proof's TTL without waiting.
func MyAdvanceClock(db *DB, d time.Duration) {
	db.proofMu.Lock()
	defer db.proofMu.Unlock()
	db.now = func() time.Time { return time.Now().Add(d) }
}

// MyPoolExec runs q, unchecked, on a session of db's MySQL pool, as a
// query that got past the checker would: for tests that no state survives
// into the next session.
func MyPoolExec(ctx context.Context, db *DB, q string) error {
	c, err := db.eng.(*myEngine).sqldb.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.ExecContext(ctx, q)
	return err
}

// MyPoolQuery reads one value with q, unchecked, on a session of db's
// MySQL pool ("NULL" for NULL).
func MyPoolQuery(ctx context.Context, db *DB, q string) (string, error) {
	c, err := db.eng.(*myEngine).sqldb.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer c.Close()
	var v *string
	if err := c.QueryRowContext(ctx, q).Scan(&v); err != nil {
		return "", err
	}
	if v == nil {
		return "NULL", nil
	}
	return *v, nil
}

// MyRestored returns the SQL db would run for stmt: the checked statement
// written back by the checker.
func MyRestored(ctx context.Context, db *DB, stmt string) (string, error) {
	return db.eng.(*myEngine).checked(ctx, stmt)
}

// MyAllowedFunctions lists the scalar, aggregate and window functions the
// checker allows on MariaDB (mariadb) or MySQL, by the parser's name.
func MyAllowedFunctions(mariadb bool) (scalar, aggregate, window []string) {
	server := myOnMySQL
	if mariadb {
		server = myOnMariaDB
	}
	for _, l := range []struct {
		from map[string]myFunc
		to   *[]string
	}{{myScalarFuncs, &scalar}, {myAggregates, &aggregate}, {myWindowFuncs, &window}} {
		for name, f := range l.from {
			if f.servers&server != 0 {
				*l.to = append(*l.to, name)
			}
		}
	}
	return scalar, aggregate, window
}

// MyReuseSessions makes db's MySQL pool keep its sessions between queries,
// as it did before each query got a session of its own: for
// BenchmarkMySQLSession's comparison only.
func MyReuseSessions(db *DB) {
	db.eng.(*myEngine).sqldb.SetMaxIdleConns(db.opts.MaxConns)
}
