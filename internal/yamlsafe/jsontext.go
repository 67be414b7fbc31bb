package yamlsafe

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// CheckJSONText returns an InvalidUTF8 *[Error] when a string of the JSON
// document data (a key or a value) is not UTF-8 text: bytes that are not
// UTF-8, or an escaped surrogate without its pair ("\udce9") — both of
// which encoding/json silently turns into U+FFFD. The error names the
// string by its path; what names the document in the message. Data that is
// not valid JSON is scanned as far as it goes: its syntax is the decoder's
// to refuse.
func CheckJSONText(data []byte, what string) error {
	type level struct {
		obj, wantKey bool
		key          string
		idx          int
	}
	var stack []level
	path := func(levels []level, extra ...string) []string {
		var p []string
		for _, l := range levels {
			if l.obj {
				p = append(p, l.key)
			} else {
				p = append(p, fmt.Sprintf("[%d]", l.idx))
			}
		}
		return append(p, extra...)
	}
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '{':
			stack = append(stack, level{obj: true, wantKey: true})
		case '[':
			stack = append(stack, level{})
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case ',':
			if n := len(stack); n > 0 {
				if stack[n-1].obj {
					stack[n-1].wantKey = true
				} else {
					stack[n-1].idx++
				}
			}
		case ':':
			if n := len(stack); n > 0 {
				stack[n-1].wantKey = false
			}
		case '"':
			end, ok := jsonString(data, i)
			raw := data[i+1 : end]
			isKey := len(stack) > 0 && stack[len(stack)-1].obj && stack[len(stack)-1].wantKey
			if !ok {
				line := 1
				for _, c := range data[:i] {
					if c == '\n' {
						line++
					}
				}
				e := &Error{Kind: InvalidUTF8, Line: line, Key: isKey}
				var name string
				if isKey {
					parent := stack[:len(stack)-1]
					e.Path = path(parent, string([]rune(string(raw))))
					name = "a key in " + joinPath(path(parent))
					if len(parent) == 0 {
						name = "a key at the top"
					}
				} else {
					e.Path = path(stack)
					name = "the value of " + joinPath(e.Path)
					if len(e.Path) == 0 {
						name = "the text"
					}
				}
				e.msg = fmt.Sprintf("%s is not valid UTF-8 text: %s (line %d) has bytes that are not UTF-8, or an escaped surrogate (\\ud800-\\udfff) without its pair; send UTF-8", what, name, line)
				return e
			}
			if isKey {
				k, err := strconv.Unquote(`"` + string(raw) + `"`)
				if err != nil {
					k = string(raw)
				}
				stack[len(stack)-1].key = k
			}
			i = end
		}
	}
	return nil
}

// jsonString finds the end (the closing quote's index, or len(data)) of the
// string starting at data[start] == '"', and reports whether it is UTF-8
// text.
func jsonString(data []byte, start int) (end int, ok bool) {
	ok = true
	i := start + 1
	for i < len(data) {
		c := data[i]
		switch {
		case c == '"':
			return i, ok
		case c == '\\':
			if i+1 < len(data) && data[i+1] == 'u' {
				r, n := hex4(data, i+2)
				if n && utf16.IsSurrogate(rune(r)) {
					r2, n2 := hex4(data, i+8)
					if r >= 0xDC00 || i+7 >= len(data) || data[i+6] != '\\' || data[i+7] != 'u' || !n2 || r2 < 0xDC00 || r2 > 0xDFFF {
						ok = false
					} else {
						i += 6 // the pair's second half
					}
				}
				i += 6
				continue
			}
			i += 2
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size <= 1 {
				ok = false
			}
			i += size
		}
	}
	return len(data), ok // not closed
}

func hex4(data []byte, at int) (int, bool) {
	if at+4 > len(data) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(data[at:at+4]), 16, 16)
	return int(v), err == nil
}
