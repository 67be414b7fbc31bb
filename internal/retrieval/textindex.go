package retrieval

import (
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// BM25 parameters (the usual ones: Lucene's and SQLite FTS5's defaults).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// Term weights: a word of the chunk's text counts 2, a word of its heading
// path or document name 1, so that headings and names help ranking without
// swamping the text. Frequencies are stored in these half units.
const (
	weightText = 2
	weightMeta = 1
)

// maxWordCache caps the words a textIndex remembers the terms of.
const maxWordCache = 1 << 20

// maxTermBytes: longer "words" (hashes, base64, URLs run together) are not
// indexed.
const maxTermBytes = 48

// scanWords calls fn for each run of letters and digits in s, lower-cased,
// with ascii telling whether it is all ASCII. The slice is reused.
func scanWords(s string, fn func(word []byte, ascii bool)) {
	var buf []byte
	ascii := true
	flush := func() {
		if len(buf) > 0 && len(buf) <= maxTermBytes {
			fn(buf, ascii)
		}
		buf = buf[:0]
		ascii = true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
				buf = append(buf, c)
			case 'A' <= c && c <= 'Z':
				buf = append(buf, c+'a'-'A')
			default:
				flush()
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			buf = utf8.AppendRune(buf, unicode.ToLower(r))
			ascii = false
		case unicode.Is(unicode.Mn, r) && len(buf) > 0:
			ascii = false // a combining mark inside a word: dropped by folding
		default:
			flush()
		}
	}
	flush()
}

// termOf returns the indexed term of a lower-case word: diacritics removed,
// ASCII words Porter-stemmed; "" for a stop word.
func termOf(word string, ascii bool) string {
	if !ascii {
		word = foldDiacritics(word)
		ascii = isASCII(word)
	}
	if stopWords[word] {
		return ""
	}
	if ascii {
		return porterStem(word)
	}
	return word
}

// tokenize calls emit for each indexable term of s: runs of letters and
// digits, lower-cased, with diacritics removed, stop words dropped and ASCII
// words Porter-stemmed.
func tokenize(s string, emit func(term string)) {
	scanWords(s, func(w []byte, ascii bool) {
		if t := termOf(string(w), ascii); t != "" {
			emit(t)
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// foldDiacritics removes combining marks after canonical decomposition
// ("café" → "cafe") and the marks' leftovers.
func foldDiacritics(w string) string {
	d := norm.NFD.String(w)
	var sb strings.Builder
	sb.Grow(len(d))
	for _, r := range d {
		if !unicode.Is(unicode.Mn, r) {
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

// queryTerms returns the distinct terms of a query, in order, at most
// MaxQueryTerms.
func queryTerms(text string) []string {
	var terms []string
	seen := map[string]bool{}
	tokenize(text, func(t string) {
		if !seen[t] && len(terms) < MaxQueryTerms {
			seen[t] = true
			terms = append(terms, t)
		}
	})
	return terms
}

// textIndex is an in-memory inverted index of one conversation's chunks,
// ranked by BM25. Chunks are numbered in the order they were added.
type textIndex struct {
	terms    map[string]int32
	chunks   [][]uint32 // per term: the chunks that have it, increasing
	freqs    [][]uint16 // per term: its frequency in each, in half units
	lens     []float32  // per chunk: its length in half units
	totalLen float64
	postings int64

	// for add: word → term id (-1 for a stop word), and per-term counts
	words   map[string]int32
	counts  []uint32
	touched []int32
}

func newTextIndex() *textIndex {
	return &textIndex{terms: map[string]int32{}, words: map[string]int32{}}
}

// termID returns the id of a word's term, creating it; -1 for a stop word.
func (ti *textIndex) termID(w []byte, ascii bool) int32 {
	if id, ok := ti.words[string(w)]; ok {
		return id
	}
	word := string(w)
	id := int32(-1)
	if t := termOf(word, ascii); t != "" {
		var ok bool
		if id, ok = ti.terms[t]; !ok {
			id = int32(len(ti.chunks))
			ti.terms[t] = id
			ti.chunks = append(ti.chunks, nil)
			ti.freqs = append(ti.freqs, nil)
			ti.counts = append(ti.counts, 0)
		}
	}
	if len(ti.words) < maxWordCache {
		ti.words[word] = id
	}
	return id
}

// add indexes chunk number c (which must be the next one) from its text and
// its heading path and document name.
func (ti *textIndex) add(c uint32, text, heading, name string) {
	length := uint32(0)
	count := func(weight uint32) func([]byte, bool) {
		return func(w []byte, ascii bool) {
			id := ti.termID(w, ascii)
			if id < 0 {
				return
			}
			if ti.counts[id] == 0 {
				ti.touched = append(ti.touched, id)
			}
			ti.counts[id] += weight
			length += weight
		}
	}
	scanWords(text, count(weightText))
	scanWords(heading, count(weightMeta))
	scanWords(name, count(weightMeta))
	for _, id := range ti.touched {
		ti.chunks[id] = append(ti.chunks[id], c)
		ti.freqs[id] = append(ti.freqs[id], uint16(min(ti.counts[id], math.MaxUint16)))
		ti.counts[id] = 0
	}
	ti.postings += int64(len(ti.touched))
	ti.touched = ti.touched[:0]
	ti.lens = append(ti.lens, float32(length))
	ti.totalLen += float64(length)
}

// bytes estimates the index's memory.
func (ti *textIndex) bytes() int64 {
	return ti.postings*6 + int64(len(ti.terms))*(64+48+4) + int64(len(ti.words))*48 + int64(len(ti.lens))*4
}

// search returns the n best chunks for the terms by BM25 among those keep
// accepts (keep may be nil), best first.
func (ti *textIndex) search(terms []string, n int, keep func(c int) bool) []hit {
	total := len(ti.lens)
	if total == 0 || n <= 0 {
		return nil
	}
	avg := ti.totalLen / float64(total)
	acc := make([]float32, total)
	var touched []uint32
	for _, t := range terms {
		id, ok := ti.terms[t]
		if !ok {
			continue
		}
		cs, fs := ti.chunks[id], ti.freqs[id]
		df := float64(len(cs))
		idf := float32(math.Log(1 + (float64(total)-df+0.5)/(df+0.5)))
		for i, c := range cs {
			tf := float32(fs[i]) / weightText
			norm := float32(bm25K1) * (1 - bm25B + bm25B*ti.lens[c]/float32(avg))
			if acc[c] == 0 {
				touched = append(touched, c)
			}
			acc[c] += idf * tf * (bm25K1 + 1) / (tf + norm)
		}
	}
	h := &minHeap{}
	for _, c := range touched {
		if keep == nil || keep(int(c)) {
			h.offer(hit{idx: int(c), tie: int64(c), score: float64(acc[c])}, n)
		}
	}
	return h.sorted()
}
