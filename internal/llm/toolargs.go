package llm

import (
	"bytes"
	"encoding/json"
	"errors"
)

// What the provider packages' wire conversions do alike with tools: a tool's
// parameters schema on the way out, a call's arguments both ways.

// ObjectOrEmpty returns a tool call's arguments without surrounding white
// space, or {} for none or null.
func ObjectOrEmpty(raw json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return json.RawMessage("{}")
	}
	return t
}

// ArgsObject returns the arguments of a tool call a provider sent, compact
// and {} for none or null, and false when they are not a JSON object.
func ArgsObject(raw []byte) (json.RawMessage, bool) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, ObjectOrEmpty(raw)); err != nil || compact.Bytes()[0] != '{' {
		return nil, false
	}
	return compact.Bytes(), true
}

// errParametersNotJSON is ToolParameters' error.
var errParametersNotJSON = errors.New("parameters are not JSON")

// ToolParameters returns the parameters schema of a tool as OpenAI and
// Ollama declare it: an object without properties for none, an error when it
// is not JSON.
func ToolParameters(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage(`{"type":"object","properties":{}}`), nil
	}
	if !json.Valid(raw) {
		return nil, errParametersNotJSON
	}
	return raw, nil
}
