package server

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"datachat"
	"datachat/internal/password"
	"datachat/internal/sqlite/sqlitetest"
)

// BenchmarkSignIn measures POST /api/auth/login for each way it ends: an
// unknown user, a user without a password and a wrong password should
// cost about the same (a dummy hash for the first two), so that the time
// does not tell which it was; a right password adds the session.
//
//	go test -run '^$' -bench SignIn -benchtime 50x ./internal/server
func BenchmarkSignIn(b *testing.B) {
	st := sqlitetest.Open(b)
	s := New(Deps{Store: st, Logger: slog.New(slog.DiscardHandler)}, Config{SignInPerUser: -1, SignInPerAddress: -1})
	ctx := b.Context()
	for _, name := range []string{"carol", "keyonly"} {
		a := &datachat.Account{User: datachat.User{Name: name}, Role: datachat.RoleMember}
		if err := st.CreateAccount(ctx, a); err != nil {
			b.Fatal(err)
		}
		if name == "carol" {
			hash, err := password.Hash(pwCarol)
			if err != nil {
				b.Fatal(err)
			}
			token := randomToken()
			if err := st.CreateInvite(ctx, &datachat.Invite{UserID: a.ID, Hash: datachat.HashAPIKey(token), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
				b.Fatal(err)
			}
			if _, err := st.UseInvite(ctx, datachat.HashAPIKey(token), hash, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	}
	h := s.Handler()
	for _, bc := range []struct {
		name, body string
		status     int
	}{
		{"unknown user", `{"user":"nobody","password":"` + pwCarol + `"}`, 401},
		{"no password", `{"user":"keyonly","password":"` + pwCarol + `"}`, 401},
		{"wrong password", `{"user":"carol","password":"` + pwCarol + `x"}`, 401},
		{"right password", `{"user":"carol","password":"` + pwCarol + `"}`, 200},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				req := httptest.NewRequest("POST", "/api/auth/login", strings.NewReader(bc.body))
				req.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != bc.status {
					b.Fatalf("got %d %s, want %d", w.Code, w.Body, bc.status)
				}
			}
		})
	}
}
