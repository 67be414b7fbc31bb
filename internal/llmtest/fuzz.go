package llmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"datachat"
	"datachat/internal/llm"
	"datachat/internal/llm/wirejson"
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

// SeedFrames adds to f's corpus each frame (an SSE event's data, an NDJSON
// line) of the answers [BenchmarkDecodeStream] decodes in protocol p and of
// the recorded answers named (when ../shared is present).
func SeedFrames(f *testing.F, p Protocol, recordings ...string) {
	f.Helper()
	for _, frame := range frames(f, p, recordings) {
		f.Add(frame)
	}
}

// CheckReader checks that a provider's reader of the chunk type T reads
// itself, as encoding/json decodes them, the frames [SeedFrames] seeds: the
// shapes real answers have are read without reflection.
func CheckReader[T any](t *testing.T, p Protocol, read func(*wirejson.Reader, *T), recordings ...string) {
	t.Helper()
	var r wirejson.Reader
	for _, frame := range frames(t, p, recordings) {
		var got, want T
		if err := json.Unmarshal(frame, &want); err != nil {
			continue // [DONE]
		}
		if !wirejson.Read(&r, frame, &got, read) {
			t.Errorf("the reader gives up on %s", frame)
		} else if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", frame, dump(got), dump(want))
		}
	}
}

// frames returns the frames of the benchmark's answers and of recordings.
func frames(tb testing.TB, p Protocol, recordings []string) [][]byte {
	tb.Helper()
	var bodies [][]byte
	for _, turn := range BenchTurns() {
		bodies = append(bodies, Answer(tb, p, turn))
	}
	for _, name := range recordings {
		if b := sharedtest.Seed(tb, "fixtures/providers/"+name); b != nil {
			bodies = append(bodies, b)
		}
	}
	var out [][]byte
	for _, body := range bodies {
		next := llm.NewSSEReader(bytes.NewReader(body)).NextData
		if p == Ollama {
			next = llm.NewNDJSONReader(bytes.NewReader(body)).Next
		}
		for frame, err := next(); err == nil; frame, err = next() {
			out = append(out, bytes.Clone(frame))
		}
	}
	return out
}

// FuzzReader fuzzes a provider's reader of the chunk type T against
// encoding/json with f's corpus: whenever read reads a chunk to its end
// ([wirejson.Read]), encoding/json decodes it without error into an equal
// value, and [wirejson.Decode] always returns what encoding/json does.
func FuzzReader[T any](f *testing.F, read func(*wirejson.Reader, *T)) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var want T
		werr := json.Unmarshal(data, &want)
		var r wirejson.Reader
		var got T
		if wirejson.Read(&r, data, &got, read) {
			if werr != nil {
				t.Fatalf("%q: read it, encoding/json fails: %v", data, werr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%q:\n got %s\nwant %s", data, dump(got), dump(want))
			}
		}
		var dec T
		err := wirejson.Decode(&r, data, &dec, read)
		if fmt.Sprint(err) != fmt.Sprint(werr) || werr == nil && !reflect.DeepEqual(dec, want) {
			t.Fatalf("%q: Decode: got %s, %v\nwant %s, %v", data, dump(dec), err, dump(want), werr)
		}
	})
}

// dump shows v with what its pointers point to.
func dump(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return strings.TrimSpace(string(b))
}
