package dbsourcetest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"

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
