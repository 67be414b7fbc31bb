package numcheck

import (
	"strconv"
	"strings"
)

// labelScore is how closely ctx names a result row: 4 when one of the row's
// text cells (or its year, in a year column) is between the number before
// and this one, 3 just after it, 1 elsewhere in the sentence, 0 if nowhere.
func (ix *index) labelScore(res, row int, ctx *sentenceCtx) int {
	r := ix.ev.Results[res]
	if row >= len(r.Rows) {
		return 0
	}
	best := 0
	for c, v := range r.Rows[row] {
		var l string
		switch x := v.(type) {
		case string:
			l = strings.TrimSpace(x)
			if len(l) < 2 || len(l) > 80 || !hasLetter(l) || numericString(l) {
				continue
			}
		case int64:
			if c >= len(r.Columns) || x < 1800 || x > 2100 || !strings.Contains(strings.ToLower(r.Columns[c]), "year") {
				continue
			}
			l = strconv.FormatInt(x, 10)
		default:
			continue
		}
		switch {
		case containsWordFold(ctx.before, l):
			return 4
		case containsWordFold(ctx.after, l):
			best = max(best, 3)
		case best < 1 && containsWordFold(ctx.whole, l):
			best = 1
		}
	}
	return best
}

func hasLetter(s string) bool {
	for _, r := range s {
		if isLetter(r) {
			return true
		}
	}
	return false
}

// containsWordFold is containsWord for a lower-case hay and a needle in any
// case.
func containsWordFold(hay, needle string) bool {
	for i := 0; i < len(needle); i++ {
		if c := needle[i]; c >= 0x80 {
			return containsWord(hay, strings.ToLower(needle))
		}
	}
	n := len(needle)
	for i := 0; i+n <= len(hay); i++ {
		if hay[i] != lowerASCII(needle[0]) || (i > 0 && isWordByte(hay[i-1])) || (i+n < len(hay) && isWordByte(hay[i+n])) {
			continue
		}
		k := 1
		for k < n && hay[i+k] == lowerASCII(needle[k]) {
			k++
		}
		if k == n {
			return true
		}
	}
	return false
}

// containsWord reports whether hay holds needle with no letter or digit
// right before or after it.
func containsWord(hay, needle string) bool { return ContainsWord(hay, needle, isWordByte) }

// ContainsWord reports whether hay holds needle (not empty) with no byte of a
// word (word reports which are) right before or after it.
func ContainsWord(hay, needle string, word func(byte) bool) bool {
	if needle == "" {
		return false
	}
	for off := 0; ; {
		i := strings.Index(hay[off:], needle)
		if i < 0 {
			return false
		}
		i += off
		j := i + len(needle)
		if (i == 0 || !word(hay[i-1])) && (j == len(hay) || !word(hay[j])) {
			return true
		}
		off = i + 1
	}
}

func isWordByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}
