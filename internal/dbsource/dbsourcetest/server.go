package dbsourcetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"datachat/internal/testenv"
)

// PostgresURL returns the superuser URL of the test cluster in
// DATACHAT_TEST_POSTGRES_URL, or skips tb (fails it under CI=true) saying
// how to start one.
func PostgresURL(tb testing.TB) string {
	tb.Helper()
	return serverURL(tb, "DATACHAT_TEST_POSTGRES_URL", "bash internal/postgres/testdata/start-test-cluster.sh", "PostgreSQL from apt-get install postgresql")
}

// MySQLURL returns the admin URL of the test MariaDB server in
// DATACHAT_TEST_MYSQL_URL, or skips tb (fails it under CI=true) saying how
// to start one.
func MySQLURL(tb testing.TB) string {
	tb.Helper()
	return serverURL(tb, "DATACHAT_TEST_MYSQL_URL", "sh internal/dbsource/testdata/start-mariadb.sh", "MariaDB from apt-get install mariadb-server")
}

func serverURL(tb testing.TB, env, script, server string) string {
	tb.Helper()
	u := os.Getenv(env)
	if u == "" {
		testenv.Missing(tb, fmt.Sprintf("set %s to run this test (database sources are tested on a real server): export %s=$(%s) (%s)", env, env, script, server))
	}
	return u
}

// Suffix returns 8 random hex digits, to name a test's databases and roles
// apart from those of other runs on the same server.
func Suffix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Tables returns the table names of the CSVs named (see [Read]).
func Tables(tb testing.TB, names []string) []string {
	tables := make([]string, len(names))
	for i, n := range names {
		tables[i] = Read(tb, n).Name
	}
	return tables
}

// WithDB returns the server URL base with database db and, unless user is
// "", the credentials user and password.
func WithDB(base, db, user, password string) string {
	u, _ := url.Parse(base)
	u.Path = "/" + db
	if user != "" {
		u.User = url.UserPassword(user, password)
	}
	return u.String()
}

// MySQLAdminDSN is the go-sql-driver DSN of the admin account of a MySQL URL
// (see [MySQLURL]), with no database selected.
func MySQLAdminDSN(u *url.URL) string {
	cfg := mysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net = "tcp"
	cfg.Addr = u.Host
	return cfg.FormatDSN()
}

// DropPostgres drops a test's database db and roles from the PostgreSQL
// server at base (see [PostgresURL]), as far as it can: it is a cleanup.
func DropPostgres(base, db string, roles ...string) {
	stmts := []string{"DROP DATABASE IF EXISTS " + db + " WITH (FORCE)"}
	for _, r := range roles {
		stmts = append(stmts, "DROP ROLE IF EXISTS "+r)
	}
	CleanPostgres(base, stmts...)
}

// CleanPostgres runs stmts on a new connection to the PostgreSQL URL base,
// in order, going on past failures: it is a cleanup.
func CleanPostgres(base string, stmts ...string) {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, base)
	if err != nil {
		return
	}
	defer c.Close(ctx)
	for _, q := range stmts {
		c.Exec(ctx, q)
	}
}

// PostgresDB is a database of a test's own on the PostgreSQL server, with
// a role that may log in; both are dropped when the test ends. The role
// may read nothing until the test grants it.
type PostgresDB struct {
	Base     string // the superuser URL of the server (see [PostgresURL])
	Name     string // the database's name
	Role     string // the login role's name
	Password string // the role's password
}

// NewPostgresDB creates database prefix_SUFFIX and role prefix_reader_SUFFIX
// (see [Suffix]) on the test PostgreSQL server, or skips tb as
// [PostgresURL] does.
func NewPostgresDB(tb testing.TB, prefix string) *PostgresDB {
	tb.Helper()
	base := PostgresURL(tb)
	sfx := Suffix()
	d := &PostgresDB{Base: base, Name: prefix + "_" + sfx, Role: prefix + "_reader_" + sfx, Password: "pw-" + sfx + "-Qx7"}
	exec(tb, base, "CREATE DATABASE "+d.Name, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", d.Role, d.Password))
	tb.Cleanup(func() { DropPostgres(base, d.Name, d.Role) })
	return d
}

// AdminURL is the superuser's URL of the database.
func (d *PostgresDB) AdminURL() string { return WithDB(d.Base, d.Name, "", "") }

// URL is the role's URL of the database.
func (d *PostgresDB) URL() string { return WithDB(d.Base, d.Name, d.Role, d.Password) }

// Exec runs stmts in the database as the superuser, in order, failing tb
// at the first that fails.
func (d *PostgresDB) Exec(tb testing.TB, stmts ...string) {
	tb.Helper()
	exec(tb, d.AdminURL(), stmts...)
}

func exec(tb testing.TB, dsn string, stmts ...string) {
	tb.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close(ctx)
	for _, q := range stmts {
		if _, err := c.Exec(ctx, q); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
}
