package chat

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"datachat"
	"datachat/internal/tools"
	"datachat/internal/vector"
)

// rankTables orders the tables for the prompt: those earlier queries used,
// then those the question ranks, each followed by the tables it joins to.
// The tables that neither names are left out: the prompt names them only.
func rankTables(rank Ranker, all []*schemaTable, question string, queries []tools.Args, vec func([]*schemaTable) []int) []int {
	var order []int
	seen := make([]bool, len(all))
	add := func(i int) {
		if !seen[i] {
			seen[i] = true
			order = append(order, i)
		}
	}
	for _, q := range queries {
		for i, t := range all {
			if t.Source == q.Source && usesTable(q.Query, t) {
				add(i)
			}
		}
	}
	docs := make([]string, len(all))
	for i, t := range all {
		docs[i] = t.doc()
	}
	ranked := rank.Rank(splitWords(question), docs, len(all))
	if vec != nil {
		if v := vec(all); len(v) > 0 {
			ranked = fuseRanks(ranked, v)
		}
	}
	bySourceName := map[string]int{}
	for i, t := range all {
		if t.Table != nil {
			bySourceName[t.Source+"\x00"+t.Table.Name] = i
		}
	}
	for _, i := range ranked {
		add(i)
		if t := all[i]; t.Table != nil {
			for _, fk := range t.Table.ForeignKeys {
				if j, ok := bySourceName[t.Source+"\x00"+fk.RefTable]; ok {
					add(j)
				}
			}
		}
	}
	return order
}

// fuseRanks fuses two rankings by reciprocal rank.
func fuseRanks(a, b []int) []int {
	const k = 60
	score := map[int]float64{}
	for _, list := range [][]int{a, b} {
		for r, i := range list {
			score[i] += 1 / float64(k+r+1)
		}
	}
	out := make([]int, 0, len(score))
	for i := range score {
		out = append(out, i)
	}
	sort.Slice(out, func(x, y int) bool {
		if score[out[x]] != score[out[y]] {
			return score[out[x]] > score[out[y]]
		}
		return out[x] < out[y]
	})
	return out
}

// usesTable reports whether sql names the table: its name, or the last
// part of a qualified one, as a word of the text (ranking only: a table
// the text merely mentions is kept in view, nothing more).
func usesTable(sql string, t *schemaTable) bool {
	lower := strings.ToLower(sql)
	names := []string{strings.ToLower(t.name())}
	if t.Table != nil {
		parts := datachat.SplitQualified(t.Table.Name)
		names = append(names, strings.ToLower(parts[len(parts)-1]))
	}
	for _, n := range names {
		for from := 0; ; {
			i := strings.Index(lower[from:], n)
			if i < 0 {
				break
			}
			i += from
			before, after := byte(' '), byte(' ')
			if i > 0 {
				before = lower[i-1]
			}
			if j := i + len(n); j < len(lower) {
				after = lower[j]
			}
			if !identByte(before) && !identByte(after) {
				return true
			}
			from = i + 1
		}
	}
	return false
}

func identByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c >= 0x80
}

// earlierQueries are the execute_sql calls of the conversation's history,
// newest first.
func earlierQueries(history []*datachat.Message) []tools.Args {
	var out []tools.Args
	for i := len(history) - 1; i >= 0; i-- {
		tcs := history[i].ToolCalls
		for j := len(tcs) - 1; j >= 0; j-- {
			if tcs[j].Tool != datachat.ToolExecuteSQL || !tcs[j].OK {
				continue
			}
			if a, err := tools.Parse(datachat.ToolExecuteSQL, tcs[j].Args); err == nil {
				out = append(out, a)
			}
		}
	}
	return out
}

// rankingText is what a turn's tables are ranked for: the question and the
// user's two messages before it.
func rankingText(history []*datachat.Message) string {
	var parts []string
	for i := len(history) - 1; i >= 0 && len(parts) < 3; i-- {
		if history[i].Role == datachat.RoleUser {
			parts = append(parts, history[i].Content)
		}
	}
	return strings.Join(parts, "\n")
}

// tableVectors ranks tables by the cosine of their embeddings with the
// question's, remembering the tables' vectors (by their text) for the next
// turns.
type tableVectors struct {
	mu   sync.Mutex
	vecs map[[32]byte][]float32
}

// maxTableVectors bounds the vectors remembered; past it they are dropped
// and embedded again as needed.
const maxTableVectors = 50_000

// embedBatch is how many tables' texts go to the embedder at once, as the
// document index sends its chunks.
const embedBatch = 64

// rank returns the tables in order of similarity to question, or nil when
// embedding fails (logged: the ranking is then BM25's alone).
func (tv *tableVectors) rank(ctx context.Context, e Embedder, log *slog.Logger, question string, all []*schemaTable) []int {
	q, err := e.Embed(ctx, []string{question})
	if err != nil || len(q) != 1 || len(q[0]) == 0 {
		if ctx.Err() == nil {
			log.WarnContext(ctx, "question embedding failed; ranking the tables by their text only", slog.Any("error", err), slog.Int("vectors", len(q)))
		}
		return nil
	}
	qv := vector.Unit(q[0])
	keys := make([][32]byte, len(all))
	var missing []int
	tv.mu.Lock()
	if tv.vecs == nil || len(tv.vecs) > maxTableVectors {
		tv.vecs = map[[32]byte][]float32{}
	}
	for i, t := range all {
		keys[i] = sha256.Sum256([]byte(t.doc()))
		if _, ok := tv.vecs[keys[i]]; !ok {
			missing = append(missing, i)
		}
	}
	tv.mu.Unlock()
	for start := 0; start < len(missing); start += embedBatch {
		batch := missing[start:min(start+embedBatch, len(missing))]
		texts := make([]string, len(batch))
		for j, i := range batch {
			texts[j] = all[i].doc()
		}
		out, err := e.Embed(ctx, texts)
		if err != nil || len(out) != len(texts) {
			log.WarnContext(ctx, "table embeddings failed; ranking the tables by their text only", slog.Any("error", err))
			return nil
		}
		tv.mu.Lock()
		for j, i := range batch {
			tv.vecs[keys[i]] = vector.Unit(out[j])
		}
		tv.mu.Unlock()
	}
	scores := make([]float64, len(all))
	tv.mu.Lock()
	for i := range all {
		v := tv.vecs[keys[i]]
		if len(v) != len(qv) {
			tv.mu.Unlock()
			return nil
		}
		scores[i] = float64(vector.Dot(qv, v))
	}
	tv.mu.Unlock()
	order := make([]int, len(all))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return scores[order[a]] > scores[order[b]] })
	return order
}
