package yamlsafe

// countValues returns an upper bound, read off the bytes without parsing,
// of the places where a YAML node (a mapping, sequence, scalar or alias,
// including the empty values YAML implies) can start, stopping once it
// passes limit. The parser builds at most a couple of nodes for each (a
// block mapping starts where its first key does), so this bounds the tree
// before it is built: yaml.v3 takes some 190 bytes a node.
//
// A node starts at the document's first character, at the first character
// of a line, after a flow indicator ([ ] { } , :), or after one of the
// block indicators - ? : followed by a space; each of those indicators can
// stand for an empty value itself. A word that follows a space inside a
// plain scalar ("revenue excludes refunds") is not a new start, so prose
// counts about once a line. Quotes, comments and block scalars are not
// understood: what they hold is counted as if it were structure, which
// can only overcount (FuzzCountValues checks the bound against the tree).
func countValues(b []byte, limit int) int {
	n := 0
	start := true // the next non-space character may start a node
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch c {
		case '\n', '\r':
			start = true
			continue
		case ' ', '\t':
			if i > 0 && (b[i-1] == '-' || b[i-1] == '?' || b[i-1] == ':') {
				start = true
			}
			continue
		case '[', ']', '{', '}', ',', ':':
			n++
			start = true
		case '-', '?':
			n++ // "- " and "? " each hold a value, empty or not
			start = false
		default:
			if start {
				n++
			}
			start = false
		}
		if n > limit {
			return n
		}
	}
	return n
}
