package workspace

import "datachat/internal/retrieval"

// Rank returns the indexes of at most n of texts that best match query by
// BM25, with the words, stemming and stop words of the document index
// (retrieval.TextRanker, built in memory for the one call), best first.
// Texts sharing no term with query are left out; equal scores keep the
// texts' order. It is the chat's ranker (chat.Ranker) of verified examples
// and of tables.
func Rank(query string, texts []string, n int) []int {
	r := retrieval.NewTextRanker()
	for _, t := range texts {
		r.Add(t)
	}
	return r.Search(query, n, nil)
}

// Rank is [Rank], for the chat turn (chat.Data).
func (w *Workspace) Rank(query string, texts []string, n int) []int {
	return Rank(query, texts, n)
}
