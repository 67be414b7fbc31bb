package llmtest

import (
	"hash/fnv"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var tokenRE = regexp.MustCompile(`[\p{L}\p{N}]+`)

// Vector is the fake embedding of text: hashed counts of its lower-cased
// words in dim buckets (each word adds +1 or -1 to one bucket), normalized to
// length 1. Texts sharing words get close vectors; a text without words gets
// the first unit vector. The embedding endpoints return exactly this.
func Vector(text string, dim int) []float32 {
	v := make([]float64, dim)
	for _, w := range tokenRE.FindAllString(strings.ToLower(text), -1) {
		h := fnv.New64a()
		_, _ = h.Write([]byte(w))
		sum := h.Sum64()
		if sum>>63 == 0 {
			v[sum%uint64(dim)]++
		} else {
			v[sum%uint64(dim)]--
		}
	}
	var norm float64
	for _, x := range v {
		norm += x * x
	}
	out := make([]float32, dim)
	if norm == 0 {
		out[0] = 1
		return out
	}
	norm = math.Sqrt(norm)
	for i, x := range v {
		out[i] = float32(x / norm)
	}
	return out
}

const stampPrefix = "[ts:"

// Stamp is the prefix a server with StampTime puts on each streamed text
// chunk: "[ts:UNIX_NANOS]".
func Stamp(t time.Time) string {
	return stampPrefix + strconv.FormatInt(t.UnixNano(), 10) + "]"
}

// ParseStamp reads a Stamp at the start of s, returning the time and the rest
// of s.
func ParseStamp(s string) (time.Time, string, bool) {
	if !strings.HasPrefix(s, stampPrefix) {
		return time.Time{}, s, false
	}
	end := strings.IndexByte(s, ']')
	if end < 0 {
		return time.Time{}, s, false
	}
	n, err := strconv.ParseInt(s[len(stampPrefix):end], 10, 64)
	if err != nil {
		return time.Time{}, s, false
	}
	return time.Unix(0, n), s[end+1:], true
}

// Stamps returns every stamp in text (for example a whole relayed answer),
// in order, and text without them.
func Stamps(text string) ([]time.Time, string) {
	var times []time.Time
	var rest strings.Builder
	for {
		i := strings.Index(text, stampPrefix)
		if i < 0 {
			rest.WriteString(text)
			return times, rest.String()
		}
		rest.WriteString(text[:i])
		t, after, ok := ParseStamp(text[i:])
		if !ok {
			rest.WriteString(text[i : i+len(stampPrefix)])
			text = text[i+len(stampPrefix):]
			continue
		}
		times = append(times, t)
		text = after
	}
}
