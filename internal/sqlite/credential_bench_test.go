package sqlite_test

import (
	"fmt"
	"testing"

	"datachat"
	"datachat/internal/sqlite/sqlitetest"
)

// What serve's check of its live credentials costs the store, twice a
// second, for as many distinct keys as have requests open: one read.
//
//	go test -run '^$' -bench RevokedCredentials ./internal/sqlite
func BenchmarkRevokedCredentials(b *testing.B) {
	for _, n := range []int{1, 100, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ctx := b.Context()
			s := sqlitetest.Open(b)
			u, err := s.EnsureUser(ctx, "bench")
			if err != nil {
				b.Fatal(err)
			}
			creds := make([]datachat.Credential, n)
			for i := range creds {
				_, hash, prefix := datachat.NewAPIKeySecret()
				k := &datachat.APIKey{UserID: u.ID, Hash: hash, Prefix: prefix}
				if err := s.CreateAPIKey(ctx, k); err != nil {
					b.Fatal(err)
				}
				creds[i] = datachat.Credential{Kind: datachat.CredentialAPIKey, ID: k.ID, UserID: u.ID}
			}
			for b.Loop() {
				revs, err := s.RevokedCredentials(ctx, creds)
				if err != nil || len(revs) != 0 {
					b.Fatal(revs, err)
				}
			}
		})
	}
}
