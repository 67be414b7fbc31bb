package llmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"

	"datachat"
	"datachat/internal/llm"
	"datachat/internal/sharedtest"
)

// SeedRecordings adds recorded answers (see [Recording]) to f's corpus, when
// ../shared is present.
func SeedRecordings(f *testing.F, names ...string) {
	f.Helper()
	for _, name := range names {
		if b := sharedtest.Seed(f, "fixtures/providers/"+name); b != nil {
			f.Add(b)
		}
	}
}

// FuzzDecodeStream fuzzes a provider's decodeStream with f's corpus of
// answer bodies: every tool call it emits has valid JSON arguments, and it
// fails only with [llm.ErrIncomplete], [llm.ErrLineTooLong] or a
// *datachat.ProviderError. Tool calls without an id are named "call_x".
func FuzzDecodeStream(f *testing.F, decodeStream func(body io.Reader, out *llm.Output, newID func() string) error) {
	f.Fuzz(func(t *testing.T, data []byte) {
		out := llm.NewOutput(context.Background(), func(ev datachat.ModelEvent) error {
			if ev.ToolCall != nil && !json.Valid(ev.ToolCall.Args) {
				t.Fatalf("invalid args %q", ev.ToolCall.Args)
			}
			return nil
		})
		err := decodeStream(bytes.NewReader(data), out, func() string { return "call_x" })
		var pe *datachat.ProviderError
		if err != nil && !errors.Is(err, llm.ErrIncomplete) && !errors.As(err, &pe) && !errors.Is(err, llm.ErrLineTooLong) {
			t.Fatalf("unexpected error type %T: %v", err, err)
		}
	})
}

// SeedRecordedError adds a recorded error answer (see [Recording]) with its
// status to f's corpus, when ../shared is present.
func SeedRecordedError(f *testing.F, status int, name string) {
	f.Helper()
	if b := sharedtest.Seed(f, "fixtures/providers/"+name); b != nil {
		f.Add(status, b)
	}
}

// FuzzMapError fuzzes a provider's mapError with f's corpus of (status, body)
// pairs: whatever the provider says went wrong must become an error of a
// known kind, with a reason for the user and no negative retry-after. (The
// Retry-After header is left out: see BENCHMARKS.md, fuzzing.)
func FuzzMapError(f *testing.F, mapError func(status int, header http.Header, body []byte) *datachat.ProviderError) {
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 0 || status > 999 {
			return // not an HTTP status
		}
		pe := mapError(status, http.Header{}, body)
		if pe == nil {
			t.Fatal("mapError returned nil")
		}
		switch pe.Kind {
		case datachat.ProviderAuth, datachat.ProviderRateLimited, datachat.ProviderUnavailable, datachat.ProviderBadRequest,
			datachat.ProviderContextTooLarge, datachat.ProviderMalformed, datachat.ProviderTimeout, datachat.ProviderConnection:
		default:
			t.Fatalf("mapError(%d, %q): kind %q", status, body, pe.Kind)
		}
		if pe.Reason == "" {
			t.Fatalf("mapError(%d, %q): no reason for the user", status, body)
		}
		if pe.RetryAfter < 0 {
			t.Fatalf("mapError(%d, %q): negative retry-after %v", status, body, pe.RetryAfter)
		}
	})
}
