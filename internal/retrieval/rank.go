package retrieval

// TextRanker ranks short texts against a query by BM25, with the words,
// stemming and stop words of the document index. It lives in memory and is
// built for one use: datachat ranks a user's verified examples by their
// questions with it, every turn.
type TextRanker struct {
	ti *textIndex
	n  int
}

// NewTextRanker returns an empty ranker.
func NewTextRanker() *TextRanker {
	return &TextRanker{ti: newTextIndex()}
}

// Add adds a text, numbered from 0 in the order added.
func (r *TextRanker) Add(text string) {
	r.ti.add(uint32(r.n), text, "", "")
	r.n++
}

// Len is the number of texts added.
func (r *TextRanker) Len() int { return r.n }

// Search returns the numbers of the (at most) n texts that best match query,
// best first, among those keep accepts (nil: all). Texts sharing no term
// with the query are left out; equal scores keep the order added.
func (r *TextRanker) Search(query string, n int, keep func(i int) bool) []int {
	hits := r.ti.search(queryTerms(query), n, keep)
	out := make([]int, len(hits))
	for i, h := range hits {
		out[i] = h.idx
	}
	return out
}
