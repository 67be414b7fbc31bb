package yamlsafe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

var bom = []byte("\xef\xbb\xbf")

// isJSON reports whether data is a JSON object or array.
func isJSON(data []byte) bool {
	t := bytes.TrimLeft(bytes.TrimPrefix(data, bom), " \t\r\n")
	return len(t) > 0 && (t[0] == '{' || t[0] == '[') && json.Valid(bytes.TrimPrefix(data, bom))
}

// unmarshalJSON decodes a document isJSON accepted: its nesting checked
// first (a byte scan is exact on valid JSON), numbers kept as json.Number
// in interfaces, unknown fields refused when o.Strict.
func unmarshalJSON(data []byte, v any, o Options) error {
	data = bytes.TrimPrefix(data, bom)
	if err := CheckJSONText(data, o.What); err != nil {
		return err
	}
	depth, inString, escaped := 0, false, false
	for i, c := range data {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			if depth++; depth > o.MaxDepth {
				line := bytes.Count(data[:i], []byte("\n")) + 1
				return &Error{Kind: TooDeep, Line: line,
					msg: fmt.Sprintf("%s nests more than %d levels deep (at line %d): flatten it", o.What, o.MaxDepth, line)}
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if o.Strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			line := bytes.Count(data[:min(int(te.Offset), len(data))], []byte("\n")) + 1
			where := te.Field
			if where == "" {
				where = "the top"
			}
			return &Error{Kind: Shape, Line: line, err: err,
				msg: fmt.Sprintf("%s is not in the expected shape: line %d: %s holds a JSON %s where %s is expected", o.What, line, where, te.Value, typeName(te.Type.String()))}
		}
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if strings.HasPrefix(msg, "unknown field ") {
			return &Error{Kind: UnknownField, err: err, msg: fmt.Sprintf("%s: %s", o.What, msg)}
		}
		return &Error{Kind: Shape, err: err, msg: fmt.Sprintf("%s is not in the expected shape: %s", o.What, msg)}
	}
	return nil
}

// typeName says a Go type as a reader of the file knows it.
func typeName(t string) string {
	t = strings.TrimLeft(t, "*")
	switch {
	case t == "string":
		return "text"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["), strings.Contains(t, "."):
		return "a mapping"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"), strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool":
		return "true or false"
	}
	return t
}
