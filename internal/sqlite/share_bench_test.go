package sqlite_test

import (
	"testing"

	"datachat"
	"datachat/internal/sqlite/sqlitetest"
	"datachat/internal/storetest"
)

// A copy of a shared conversation of 1,000 questions and answers:
//
//	go test -run '^$' -bench CopyShared ./internal/sqlite
func BenchmarkCopyShared(b *testing.B) {
	storetest.BenchCopyShared(b, 1000, func(b *testing.B) datachat.Store { return sqlitetest.Open(b) })
}
