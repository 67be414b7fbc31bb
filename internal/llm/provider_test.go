package llm

import (
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"datachat"
)

var errBadFrame = errors.New("bad frame")

// frameDecoder is a FrameDecoder for the tests: each frame is one text delta,
// "end" is the end marker, and its end gives one last event.
type frameDecoder struct {
	done  bool
	usage *datachat.TokenCount
}

func (d *frameDecoder) Feed(frame []byte) ([]datachat.ModelEvent, error) {
	switch string(frame) {
	case "end":
		d.done = true
		return nil, nil
	case "bad":
		return []datachat.ModelEvent{{Text: "partial"}}, errBadFrame
	}
	d.usage = &datachat.TokenCount{Input: 1, Output: int64(len(frame))}
	return []datachat.ModelEvent{{Text: string(frame)}}, nil
}

func (d *frameDecoder) Usage() *datachat.TokenCount { return d.usage }
func (d *frameDecoder) Done() bool                  { return d.done }
func (d *frameDecoder) End() ([]datachat.ModelEvent, string, error) {
	if !d.done {
		return nil, "", ErrIncomplete
	}
	return []datachat.ModelEvent{{Text: "!"}}, FinishStop, nil
}

func frames(fs ...string) func() ([]byte, error) {
	return func() ([]byte, error) {
		if len(fs) == 0 {
			return nil, io.EOF
		}
		f := fs[0]
		fs = fs[1:]
		return []byte(f), nil
	}
}

func TestDecodeFrames(t *testing.T) {
	tests := []struct {
		name    string
		frames  []string
		want    string // the texts emitted, then the finish reason
		wantErr error
	}{
		{"ends at the marker", []string{"a", "bc", "end", "never read"}, "abc!stop", nil},
		{"cut short", []string{"a"}, "a", ErrIncomplete},
		{"bad frame", []string{"a", "bad", "end"}, "apartial", errBadFrame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got string
			var usage *datachat.TokenCount
			out := NewOutput(context.Background(), func(ev datachat.ModelEvent) error {
				got += ev.Text + ev.FinishReason
				if ev.Usage != nil {
					usage = ev.Usage
				}
				return nil
			})
			err := DecodeFrames(frames(tt.frames...), out, &frameDecoder{})
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("got error %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && (usage == nil || usage.Output != 2) {
				t.Errorf("got usage %+v, want the last frame's (output 2)", usage)
			}
		})
	}
}

func TestProviderHeader(t *testing.T) {
	bearer := Provider{Name: "openai", KeyHeader: "Authorization", KeyPrefix: "Bearer "}
	google := Provider{Name: "gemini", KeyHeader: "x-goog-api-key"}
	tests := []struct {
		name string
		p    Provider
		key  string
		want http.Header
	}{
		{"bearer", bearer, "k1", http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer k1"}}},
		{"plain", google, "k2", http.Header{"Content-Type": {"application/json"}, "X-Goog-Api-Key": {"k2"}}},
		{"no key", bearer, "", http.Header{"Content-Type": {"application/json"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Header(tt.key); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestChatRequest(t *testing.T) {
	req := &datachat.ModelRequest{
		Messages: []datachat.ModelMessage{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "hello"}},
		Tools:    []datachat.ToolSpec{{Name: "run_sql"}},
	}
	h := http.Header{"Accept": {"text/event-stream"}}
	got := ChatRequest("http://x/chat", h, "m", req)
	want := Request{URL: "http://x/chat", Header: h, Model: "m", Messages: 2, Tools: 1}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestWithCallIDs(t *testing.T) {
	var id string
	decode := WithCallIDs(func(body io.Reader, out *Output, newID func() string) error {
		id = newID()
		return nil
	})
	if err := decode(strings.NewReader(""), nil); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(id, "call_") || len(id) != len("call_")+16 {
		t.Errorf("got id %q, want call_ and 16 hex digits", id)
	}
}
