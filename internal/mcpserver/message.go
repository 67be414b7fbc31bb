package mcpserver

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// MessageError is the JSON-RPC error answering something a client sent that
// is not one message the server can read: -32700 Parse error for text that
// is not JSON, -32600 Invalid Request for JSON that is not a JSON-RPC 2.0
// message. The SDK's transports end a stdio session at such a line, and
// answer such an HTTP body in plain text; the callers answer with this
// instead, and serve on.
type MessageError struct {
	ID      json.RawMessage // the message's id when it has a usable one; else null
	Code    int
	Message string
}

func (e *MessageError) Error() string { return e.Message }

// JSON is the error as a JSON-RPC response, without a newline.
func (e *MessageError) JSON() []byte {
	id := e.ID
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   any             `json:"error"`
	}{"2.0", id, map[string]any{"code": e.Code, "message": e.Message}})
	return b
}

// CheckMessage returns nil when b is one JSON-RPC 2.0 message, and the
// error answering it otherwise. A JSON array (a batch) is the caller's to
// judge: it gets nil when it is valid JSON.
func CheckMessage(b []byte) *MessageError {
	if !json.Valid(b) {
		var v any
		msg := "Parse error: not valid JSON"
		if err := json.Unmarshal(b, &v); err != nil {
			msg += " (" + err.Error() + ")"
		}
		return &MessageError{Code: jsonrpc.CodeParseError, Message: msg + "; send one JSON-RPC message"}
	}
	if i := firstNonSpace(b); i < len(b) && b[i] == '[' {
		return nil
	}
	if _, err := jsonrpc.DecodeMessage(b); err != nil {
		e := &MessageError{Code: jsonrpc.CodeInvalidRequest, Message: "Invalid Request: not a JSON-RPC 2.0 message (" + err.Error() + ")"}
		var withID struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(b, &withID) == nil && len(withID.ID) > 0 {
			var v any
			if json.Unmarshal(withID.ID, &v) == nil {
				if _, err := jsonrpc.MakeID(v); err == nil && v != nil {
					e.ID = withID.ID
				}
			}
		}
		return e
	}
	return nil
}

func firstNonSpace(b []byte) int {
	for i, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return i
		}
	}
	return len(b)
}
