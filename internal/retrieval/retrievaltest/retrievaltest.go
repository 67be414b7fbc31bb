// Package retrievaltest holds helpers for testing and benchmarking retrieval:
// a deterministic embedder, the location of the shared test documents and the
// labelled questions asked of them.
package retrievaltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"unicode"

	"datachat"
	"datachat/internal/sharedtest"
)

// HashEmbedder is a deterministic embedder with no model behind it: a text's
// vector is the hashed counts of its lower-case words (crudely stemmed) and
// of their character trigrams, in Dim buckets with a hashed sign. Similar
// wording gives similar vectors; meaning does not. Set Fail to make Embed
// fail, as a provider outage would.
type HashEmbedder struct {
	Dim   int
	Fail  atomic.Bool
	calls atomic.Int64
	texts atomic.Int64
}

// ErrEmbed is what Embed returns while Fail is set.
var ErrEmbed = errors.New("hash embedder: failing on purpose")

// Embed implements chat.Embedder.
func (e *HashEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.calls.Add(1)
	e.texts.Add(int64(len(texts)))
	if e.Fail.Load() {
		return nil, ErrEmbed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dim := e.Dim
	if dim <= 0 {
		dim = 256
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, dim)
		for _, w := range strings.FieldsFunc(strings.ToLower(t), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
			if stop[w] {
				continue
			}
			w = stem(w)
			add(v, "w:"+w, 1)
			if len(w) > 3 {
				for j := 0; j+3 <= len(w); j++ {
					add(v, "t:"+w[j:j+3], 0.3)
				}
			}
		}
		out[i] = v
	}
	return out, nil
}

// Calls returns how many times Embed ran and how many texts it was given.
func (e *HashEmbedder) Calls() (calls, texts int64) { return e.calls.Load(), e.texts.Load() }

func add(v []float32, s string, weight float32) {
	h := fnv.New64a()
	h.Write([]byte(s))
	x := h.Sum64()
	if x>>63 == 1 {
		weight = -weight
	}
	v[int(x%uint64(len(v)))] += weight
}

func stem(w string) string {
	for _, suf := range []string{"ing", "ies", "es", "ed", "s"} {
		if len(w) > len(suf)+3 && strings.HasSuffix(w, suf) {
			return strings.TrimSuffix(w, suf)
		}
	}
	return w
}

var stop = map[string]bool{}

func init() {
	for w := range strings.FieldsSeq(`a an and are as at be by for from has have how i in is it its of on or that the
		this to was were what when where which who why will with do does did can you your`) {
		stop[w] = true
	}
}

// RepoRoot returns the directory holding go.mod, searching up from the
// working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// SharedDocs returns ../shared/data/docs beside the repository root.
func SharedDocs() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	docs := filepath.Join(root, "..", "shared", "data", "docs")
	if _, err := os.Stat(docs); err != nil {
		return "", err
	}
	return docs, nil
}

// SharedDocsOrSkip returns ../shared/data/docs, or skips the test saying
// where it looks (fails it under CI=true) when the shared folder is absent.
func SharedDocsOrSkip(tb testing.TB) string {
	tb.Helper()
	return sharedtest.Path(tb, "data/docs")
}

// Question is one labelled question of internal/retrieval/testdata/eval.json:
// a chunk answers it if it is of Document and, where they are set, on one of
// Pages, under a heading containing Section and with text containing
// Contains (both case-insensitively).
type Question struct {
	Question string `json:"question"`
	Document string `json:"document"`
	Pages    []int  `json:"pages"`
	Section  string `json:"section"`
	Contains string `json:"contains"`
}

// LoadQuestions reads the labelled questions of
// internal/retrieval/testdata/eval.json.
func LoadQuestions() ([]Question, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(root, "internal", "retrieval", "testdata", "eval.json"))
	if err != nil {
		return nil, err
	}
	var set struct {
		Questions []Question `json:"questions"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("read eval.json: %w", err)
	}
	return set.Questions, nil
}

// Answers reports whether s is a chunk that answers q. It reads the metadata
// keys retrieval.MetaDocument, MetaPage and MetaSection, which this package
// cannot name: retrieval's own tests import it.
func (q Question) Answers(s datachat.Source) bool {
	if s.Metadata["document"] != q.Document {
		return false
	}
	if len(q.Pages) > 0 {
		p, _ := s.Metadata["page"].(int)
		if !slices.Contains(q.Pages, p) {
			return false
		}
	}
	if q.Section != "" {
		sec, _ := s.Metadata["section"].(string)
		if !strings.Contains(strings.ToLower(sec), strings.ToLower(q.Section)) {
			return false
		}
	}
	return q.Contains == "" || strings.Contains(strings.ToLower(s.Text), strings.ToLower(q.Contains))
}
