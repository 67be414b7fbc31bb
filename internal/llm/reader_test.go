package llm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func readEvents(t *testing.T, r io.Reader) []Event {
	t.Helper()
	sse := NewSSEReader(r)
	var out []Event
	for {
		ev, err := sse.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		ev.Data = bytes.Clone(ev.Data) // valid until the next call
		out = append(out, ev)
	}
}

// TestSSEReaderReusesData: an event's data is read into the memory of the
// last one, and a buffer grown past keptDataBytes is not kept.
func TestSSEReaderReusesData(t *testing.T) {
	long := strings.Repeat("z", keptDataBytes+1)
	sse := NewSSEReader(strings.NewReader("data: " + long + "\n\ndata: ab\n\ndata: cd\n\n"))
	first, err := sse.Next()
	if err != nil || string(first.Data) != long {
		t.Fatalf("first event: %v", err)
	}
	second, err := sse.Next()
	if err != nil || string(second.Data) != "ab" {
		t.Fatalf("second event: %q, %v", second.Data, err)
	}
	if cap(second.Data) > keptDataBytes {
		t.Errorf("the long event's buffer (%d bytes) was kept", cap(second.Data))
	}
	third, err := sse.Next()
	if err != nil || string(third.Data) != "cd" {
		t.Fatalf("third event: %q, %v", third.Data, err)
	}
	if &second.Data[0] != &third.Data[0] {
		t.Error("the third event's data was not read into the second's memory")
	}
}

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []Event
	}{
		{"gemini CRLF framing", "data: {\"a\": 1}\r\n\r\ndata: {\"b\": 2}\r\n\r\n", []Event{{Data: []byte(`{"a": 1}`)}, {Data: []byte(`{"b": 2}`)}}},
		{"openai LF framing with DONE", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []Event{{Data: []byte(`{"a":1}`)}, {Data: []byte(`[DONE]`)}}},
		{"no space after colon", "data:{\"a\":1}\n\n", []Event{{Data: []byte(`{"a":1}`)}}},
		{"multi-line data joined", "data: a\ndata: b\n\n", []Event{{Data: []byte("a\nb")}}},
		{"comments and ids ignored", ": keep-alive\nid: 7\nretry: 100\ndata: x\n\n", []Event{{Data: []byte("x")}}},
		{"event name", "event: error\ndata: {}\n\n", []Event{{Name: "error", Data: []byte("{}")}}},
		{"blank lines without data", "\n\n\r\n", nil},
		{"last event without blank line", "data: x\n\ndata: y", []Event{{Data: []byte("x")}, {Data: []byte("y")}}},
		{"lone CR line ends", "data: x\r\rdata: y\r\r", []Event{{Data: []byte("x")}, {Data: []byte("y")}}},
		{"empty data field", "data:\n\n", []Event{{Data: []byte{}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tt.input), iotest.OneByteReader(strings.NewReader(tt.input))} {
				got := readEvents(t, r)
				if len(got) != len(tt.want) {
					t.Fatalf("got %d events %q, want %d", len(got), got, len(tt.want))
				}
				for i := range got {
					if got[i].Name != tt.want[i].Name || !bytes.Equal(got[i].Data, tt.want[i].Data) {
						t.Errorf("event %d: got %q %q, want %q %q", i, got[i].Name, got[i].Data, tt.want[i].Name, tt.want[i].Data)
					}
				}
			}
		})
	}
}

func TestSSEReaderReadError(t *testing.T) {
	boom := errors.New("connection reset")
	sse := NewSSEReader(io.MultiReader(strings.NewReader("data: x\n\ndata: partial"), iotest.ErrReader(boom)))
	if ev, err := sse.Next(); err != nil || string(ev.Data) != "x" {
		t.Fatalf("first event: got %q, %v", ev.Data, err)
	}
	if _, err := sse.Next(); !errors.Is(err, boom) {
		t.Fatalf("got %v, want the read error (a cut-off event is not an event)", err)
	}
}

func TestLineTooLong(t *testing.T) {
	huge := strings.Repeat("x", MaxLineBytes+10)
	if _, err := NewNDJSONReader(strings.NewReader(huge + "\n")).Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("got %v, want ErrLineTooLong", err)
	}
}

func TestNDJSONReader(t *testing.T) {
	in := "{\"a\":1}\n\n  \n{\"b\":2}\r\n{\"c\":3}"
	r := NewNDJSONReader(iotest.HalfReader(strings.NewReader(in)))
	var got []string
	for {
		line, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(line))
	}
	want := []string{`{"a":1}`, `{"b":2}`, `{"c":3}`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("data: {\"a\": 1}\r\n\r\ndata: [DONE]\n\n"))
	f.Add([]byte(": c\nevent: e\ndata: a\ndata: b\r\r\n"))
	f.Add([]byte("data"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sse := NewSSEReader(bytes.NewReader(data))
		for i := 0; i <= len(data)+1; i++ {
			if _, err := sse.Next(); err != nil {
				return
			}
		}
		t.Fatalf("more events than bytes in %q", data)
	})
}

func FuzzNDJSONReader(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n{\"done\":true}\n"))
	f.Add([]byte("\r\r\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewNDJSONReader(bytes.NewReader(data))
		for i := 0; i <= len(data)+1; i++ {
			if _, err := r.Next(); err != nil {
				return
			}
		}
		t.Fatalf("more lines than bytes in %q", data)
	})
}
