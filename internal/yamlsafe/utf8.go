package yamlsafe

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// invalidUTF8 is the error for data that is not UTF-8: it names the line
// and, when the rest of the document parses, the value (or key) holding
// the first invalid byte, found in a copy where each invalid byte is U+FFFD.
func invalidUTF8(data []byte, o Options) *Error {
	bad := 0
	for bad < len(data) {
		r, size := utf8.DecodeRune(data[bad:])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		bad += size
	}
	line := bytes.Count(data[:bad], []byte("\n")) + 1
	lineStart := bytes.LastIndexByte(data[:bad], '\n') + 1
	col := utf8.RuneCount(data[lineStart:bad]) + 1
	e := &Error{Kind: InvalidUTF8, Line: line}
	// One U+FFFD for each invalid byte keeps lines and columns (counted
	// in characters); '?' would not do: yaml.v3 refuses "a?," in flow.
	sane := make([]byte, 0, len(data)+len(data)/4)
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			sane = utf8.AppendRune(sane, utf8.RuneError)
			i++
			continue
		}
		sane = append(sane, data[i:i+size]...)
		i += size
	}
	var doc yaml.Node
	if yaml.Unmarshal(sane, &doc) == nil {
		e.Path, e.Key = locate(&doc, line, col)
	}
	if len(e.Path) > 0 {
		what := "the value of " + joinPath(e.Path)
		if e.Key {
			what = "the key " + joinPath(e.Path)
		}
		e.msg = fmt.Sprintf("%s is not valid UTF-8 text: %s (line %d) has bytes that are not UTF-8; save the file as UTF-8", o.What, what, line)
	} else {
		e.msg = fmt.Sprintf("%s is not valid UTF-8 text (line %d, column %d): save it as UTF-8", o.What, line, col)
	}
	return e
}

// locate returns the path of the last scalar that starts at or before
// line:col, in document order, and whether it is a mapping key.
func locate(doc *yaml.Node, line, col int) (path []string, key bool) {
	type item struct {
		n    *yaml.Node
		path []string
		key  bool
	}
	before := func(n *yaml.Node) bool { return n.Line < line || n.Line == line && n.Column <= col }
	stack := []item{{n: doc}}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		n := it.n
		if !before(n) {
			continue
		}
		switch n.Kind {
		case yaml.ScalarNode, yaml.AliasNode:
			// Pushed in reverse document order below: the last one
			// popped that starts before line:col is the one.
			path, key = it.path, it.key
		case yaml.DocumentNode:
			for i := len(n.Content) - 1; i >= 0; i-- {
				stack = append(stack, item{n.Content[i], it.path, false})
			}
		case yaml.SequenceNode:
			for i := len(n.Content) - 1; i >= 0; i-- {
				stack = append(stack, item{n.Content[i], appendPath(it.path, fmt.Sprintf("[%d]", i)), false})
			}
		case yaml.MappingNode:
			for i := len(n.Content) - 2; i >= 0; i -= 2 {
				k := n.Content[i]
				p := appendPath(it.path, k.Value)
				stack = append(stack, item{n.Content[i+1], p, false}, item{k, p, true})
			}
		}
	}
	return path, key
}
