package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"datachat"
	"datachat/internal/chat"
)

// TestTurnError: an error of a turn is classified wherever it sits in the
// chain (wrapped, joined), so no condition the turn can name reaches a REST
// client as "Internal error.".
func TestTurnError(t *testing.T) {
	provider := &datachat.ProviderError{Kind: datachat.ProviderNotConfigured, Reason: "No provider.", SuggestedAction: "Set DATACHAT_LLM_PROVIDER."}
	for _, c := range []struct {
		name   string
		err    error
		status int
		msg    string
	}{
		{"provider", provider, http.StatusBadGateway, "No language model is configured. No provider. Set DATACHAT_LLM_PROVIDER."},
		{"wrapped provider", fmt.Errorf("turn: %w", provider), http.StatusBadGateway, "No language model is configured."},
		{"joined provider", errors.Join(errors.New("close"), provider), http.StatusBadGateway, "No language model is configured."},
		{"rate limit", fmt.Errorf("admit: %w", &datachat.Error{Code: datachat.ERATELIMIT, Message: "Too many turns.", RetryAfter: 3 * time.Second}), http.StatusTooManyRequests, "Too many turns."},
		{"not saved", &chat.SaveError{Err: errors.New("disk I/O error")}, http.StatusServiceUnavailable, "The answer could not be saved."},
		{"not saved, store away", &chat.SaveError{Err: datachat.StoreUnavailable(errors.New("connection refused"))}, http.StatusServiceUnavailable, "The database is unavailable"},
		{"not found", datachat.Errorf(datachat.ENOTFOUND, "Conversation not found."), http.StatusNotFound, "Conversation not found."},
		{"bug", errors.New("nil map"), http.StatusInternalServerError, "Internal error."},
	} {
		err := turnError(c.err)
		if st := ErrorStatus(err); st != c.status {
			t.Errorf("%s: status %d, want %d", c.name, st, c.status)
		}
		if msg := datachat.ErrorMessage(err); !strings.HasPrefix(msg, c.msg) {
			t.Errorf("%s: message %q, want it to start %q", c.name, msg, c.msg)
		}
	}
}
