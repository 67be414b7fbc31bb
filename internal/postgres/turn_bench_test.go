package postgres_test

import (
	"testing"

	"datachat/internal/storetest"
)

// BenchmarkTurn is [storetest.BenchTurn] on PostgreSQL.
//
//	go test -run '^$' -bench Turn ./internal/postgres
func BenchmarkTurn(b *testing.B) { storetest.BenchTurn(b, benchStore(b)(b)) }
