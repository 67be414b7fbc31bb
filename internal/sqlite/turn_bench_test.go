package sqlite_test

import (
	"testing"

	"datachat/internal/sqlite/sqlitetest"
	"datachat/internal/storetest"
)

// BenchmarkTurn is [storetest.BenchTurn] on SQLite.
//
//	go test -run '^$' -bench Turn ./internal/sqlite
func BenchmarkTurn(b *testing.B) { storetest.BenchTurn(b, sqlitetest.Open(b)) }
