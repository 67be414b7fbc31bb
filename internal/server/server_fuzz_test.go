package server

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"datachat"
	"datachat/internal/chat"
)

// Fuzz targets for the server's decoders of client input: WebSocket messages
// and the /chat/query request. Run one with, e.g.:
// go test -run '^$' -fuzz '^FuzzDecodeClientMessage$' -fuzztime 30s ./internal/server

func FuzzDecodeClientMessage(f *testing.F) {
	for _, s := range []string{
		`{"type":"chat_send","data":{"content":"How many rows?"}}`,
		`{"type":"chat_cancel","data":{}}`,
		`{"type":"chat_cancel"}`,
		`{"type":"confirm_action","data":{"id":"c1","approved":true,"note":"ok"}}`,
		`{"type":"confirm_action","data":{"id":"c1"}}`,
		`{"type":"chat_send","data":{"content":7}}`,
		`{"type":"chat_send","data":null}`,
		`{"type":"unknown","data":[]}`,
		`{"type":"","data":{}}`,
		`{"TYPE":"chat_send","Data":{"Content":"case"}}`,
		`[1,2]`, `"chat_send"`, `{"type":"chat_send","data":{"content":"\u0000\ud800"}}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		msg, err := decodeClientMessage(b)
		if err != nil {
			if datachat.ErrorCode(err) != datachat.EINVALID || datachat.ErrorMessage(err) == "" {
				t.Fatalf("got error %v, want EINVALID with a message for the client", err)
			}
			return
		}
		switch msg.Type {
		case "chat_send", "chat_cancel":
		case "confirm_action":
			if msg.ID == "" {
				t.Fatalf("confirm_action accepted without an id: %q", b)
			}
		default:
			t.Fatalf("accepted message type %q", msg.Type)
		}
		// What was accepted survives a round trip through its canonical form.
		again, err := decodeClientMessage(encodeClientMessage(msg))
		if err != nil || again != msg {
			t.Fatalf("round trip of %+v: got %+v, %v", msg, again, err)
		}
	})
}

// encodeClientMessage is the canonical JSON of a decoded client message.
func encodeClientMessage(m clientMessage) []byte {
	var data any = struct{}{}
	switch m.Type {
	case "chat_send":
		data = map[string]string{"content": m.Content}
	case "confirm_action":
		data = map[string]any{"id": m.ID, "approved": m.Approved, "note": m.Note}
	}
	b, _ := json.Marshal(map[string]any{"type": m.Type, "data": data})
	return b
}

func FuzzChatQueryRequest(f *testing.F) {
	for _, s := range []string{
		`{"query":"What is the average tip?"}`,
		`{"query":"q","conversation_id":"c1","metadata_filters":{"author":"x","year":["2024","2025"]}}`,
		`{"query":"q","override":{"temperature":0.2,"top_k":5,"max_output_tokens":100,"include_embeddings":false}}`,
		`{"query":"q","override":{"temperature":3}}`,
		`{"query":"q","metadata_filters":{"secret":"x"}}`,
		`{"query":"q","metadata_filters":{"year":[1]}}`,
		`{"query":"   \t\n"}`, `{"query":"a"} {"query":"b"}`, `{"query":"q","extra":1}`,
		`{"query":"` + strings.Repeat("é", 2001) + `"}`, `null`, `{}`, ``,
	} {
		f.Add([]byte(s))
	}
	s := &Server{cfg: Config{AllowedMetadataKeys: []string{"author", "year"}}}
	const maxChars = 2000
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", "/chat/query", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		var req chatQueryRequest
		refused := func(what string, err error) {
			t.Helper()
			if datachat.ErrorCode(err) != datachat.EINVALID || datachat.ErrorMessage(err) == "" {
				t.Fatalf("%s: got error %v, want EINVALID with a message for the client", what, err)
			}
		}
		if err := decodeJSON(w, r, &req); err != nil {
			refused("decode", err)
			return
		}
		opts, err := s.turnOptions(&req)
		if err != nil {
			refused("options", err)
			return
		}
		if o := opts.Temperature; o != nil && (*o < 0 || *o > 2) {
			t.Fatalf("temperature %v accepted", *o)
		}
		if opts.TopK < 0 || opts.TopK > 50 || opts.MaxOutputTokens < 0 || opts.MaxOutputTokens > 8192 {
			t.Fatalf("override out of range accepted: %+v", opts)
		}
		for k := range opts.Filters {
			if k != "author" && k != "year" {
				t.Fatalf("metadata filter %q accepted", k)
			}
		}
		q, err := chat.CleanQuery(req.Query, maxChars)
		if err != nil {
			refused("query", err)
			return
		}
		if q == "" || !utf8.ValidString(q) || utf8.RuneCountInString(q) > maxChars || strings.TrimSpace(q) != q {
			t.Fatalf("query %q accepted as %q", req.Query, q)
		}
		for _, c := range q {
			if unicode.IsControl(c) && c != '\n' && c != '\t' {
				t.Fatalf("control character %U left in %q", c, q)
			}
		}
	})
}
