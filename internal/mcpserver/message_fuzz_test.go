package mcpserver

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// FuzzCheckMessage: whatever a client sends is a message (the SDK decodes
// it), a batch left to the caller, or answered with a JSON-RPC error that is
// itself valid JSON-RPC.
func FuzzCheckMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, `{"jsonrpc":"2.0","method":"x"}`, `{"jsonrpc":"2.0","id":"a","result":{}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"x"}]`, `not json`, `{"id":4}`, `42`, "\x00\xff", `{"jsonrpc":"2.0","id":[1],"method":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e := CheckMessage(b)
		if e == nil {
			if i := firstNonSpace(b); i < len(b) && b[i] == '[' {
				return
			}
			if _, err := jsonrpc.DecodeMessage(b); err != nil {
				t.Fatalf("%q passed, but the SDK does not decode it: %v", b, err)
			}
			return
		}
		var resp struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		out := e.JSON()
		if err := json.Unmarshal(out, &resp); err != nil || resp.JSONRPC != "2.0" || resp.Error.Code != e.Code || resp.Error.Message == "" || len(resp.ID) == 0 {
			t.Fatalf("%q answered with %s (%v)", b, out, err)
		}
		if e.Code != jsonrpc.CodeParseError && e.Code != jsonrpc.CodeInvalidRequest {
			t.Fatalf("%q: code %d", b, e.Code)
		}
	})
}
