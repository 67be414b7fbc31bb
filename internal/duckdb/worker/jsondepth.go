package worker

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"datachat"
)

// scanJSON reads JSON as DuckDB's read_json does (DuckDB 1.5.5, held to it
// by TestJSONAsDuckDBReads) — any number of top-level values, one a
// line or side by side, strings with backslash escapes, NaN, Infinity and
// other bare words, a byte-order mark at the start — and returns the
// deepest nesting of arrays and objects, refusing (EINVALID, naming the
// file) one deeper than maxDepth. What DuckDB does not read and a byte
// counter could be fooled by is an error here too: comments (/* */, //, #),
// single quotes, a closing bracket that closes nothing or the wrong thing,
// a file that ends inside a string or a value. Only the structure is
// checked: commas, colons and the spelling of numbers are DuckDB's.
func scanJSON(r io.Reader, name string, maxDepth int) (int, error) {
	br, ok := r.(io.ByteReader)
	if !ok {
		br = bufio.NewReader(r)
	}
	var stack []byte // the open brackets
	deepest, line, offset := 0, 1, int64(0)
	fail := func(format string, args ...any) (int, error) {
		return deepest, datachat.Errorf(datachat.EINVALID, "%s is not JSON that can be loaded: %s (line %d, byte %d)", name, fmt.Sprintf(format, args...), line, offset)
	}
	read := func() (byte, error) {
		c, err := br.ReadByte()
		if err == nil {
			offset++
			if c == '\n' {
				line++
			}
		}
		return c, err
	}
	for first := true; ; first = false {
		c, err := read()
		if errors.Is(err, io.EOF) {
			if len(stack) > 0 {
				what := "an array"
				if stack[len(stack)-1] == '{' {
					what = "an object"
				}
				return fail("the file ends inside %s", what)
			}
			return deepest, nil
		}
		if err != nil {
			return deepest, err
		}
		switch {
		case first && c == 0xef: // a byte-order mark: EF BB BF
			b1, e1 := read()
			b2, e2 := read()
			if e1 != nil || e2 != nil || b1 != 0xbb || b2 != 0xbf {
				return fail("unexpected bytes at the start")
			}
		case c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v' || c == ',' || c == ':':
		case c == '[' || c == '{':
			stack = append(stack, c)
			if len(stack) > maxDepth {
				return deepest, datachat.Errorf(datachat.EINVALID, "%s nests arrays and objects more than %d levels deep (line %d), more than can be loaded: flatten it first", name, maxDepth, line)
			}
			deepest = max(deepest, len(stack))
		case c == ']' || c == '}':
			open := byte('[')
			if c == '}' {
				open = '{'
			}
			switch {
			case len(stack) == 0:
				return fail("a %c that closes nothing", c)
			case stack[len(stack)-1] != open:
				return fail("a %c where %c closes the %c before it", c, closer(stack[len(stack)-1]), stack[len(stack)-1])
			}
			stack = stack[:len(stack)-1]
		case c == '"':
			for escaped := false; ; {
				s, err := read()
				if errors.Is(err, io.EOF) {
					return fail("the file ends inside a string")
				}
				if err != nil {
					return deepest, err
				}
				if escaped {
					escaped = false
				} else if s == '\\' {
					escaped = true
				} else if s == '"' {
					break
				}
			}
		case c == '/':
			return fail("comments (/* */ and //) are not JSON, and DuckDB does not read them: remove them")
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.':
			// A number or a bare word (true, null, NaN, Infinity): DuckDB
			// checks its spelling.
		default:
			return fail("unexpected character %q", c)
		}
	}
}

func closer(open byte) byte {
	if open == '{' {
		return '}'
	}
	return ']'
}
