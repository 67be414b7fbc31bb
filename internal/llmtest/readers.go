package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"datachat/internal/llm"
	"datachat/internal/llm/wirejson"
	"datachat/internal/sharedtest"
)

// The checks of a provider's chunk readers (package wirejson) against
// encoding/json, on the frames of real and fake answers.

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
