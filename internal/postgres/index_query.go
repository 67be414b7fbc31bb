package postgres

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"datachat/internal/record"
	"datachat/internal/retrieval"
)

// Searching the index: the user's text turned into tsqueries, chunks ranked
// by full text alone or, with vectors, by both rankings fused, and the
// filters of a search as SQL.

// Ranking. ts_rank, not ts_rank_cd: for an OR of words, cover density
// scores a chunk by how close together the matched words are and little by
// how often it has them, while ts_rank's saturating term frequency is the
// nearer to BM25. Its weights are {D, C, B, A}: the chunk's text (A) counts
// 1, its heading path (B) and document name (C) half, as in the embedded
// index. Normalisation 1 divides by log2(length + 1), so that long chunks do
// not win by having every word, without burying them. Measured on the
// labelled questions (TestIndexRecall, recall@5 / MRR@5): this 0.952 / 0.881;
// ts_rank with normalisation 0, 2 or 32 0.929 / 0.78–0.81; ts_rank_cd 0.833
// (normalisation 0–2) and 0.929 / 0.806 (4).
const rankSQL = `ts_rank('{0.1, 0.5, 0.5, 1}', c.tsv, query.rq, 1)::float8`

// queryCTE turns the user's text ($2) into two tsqueries, ORs of its lexemes,
// quoted: query.rq of all of them, by which chunks are ranked, and query.q of
// those that are not common in the conversation ($1), by which chunks are
// matched. The text is never parsed as tsquery syntax: to_tsvector splits it
// into words as it does chunks (lower-cased, stop words dropped, stemmed),
// once as written and once with punctuation read as spaces (as document
// names are indexed), and each lexeme is quoted, its ' and \ escaped, before
// the cast. A text of stop words gives NULL, which matches nothing. At most
// [retrieval.MaxQueryTerms] lexemes are kept, the first in the text.
//
// Common words: a lexeme that more than [commonFraction] of the
// conversation's indexed chunks have, and more than [commonMinChunks], is
// not matched on (chunk_lexemes, migration 0006, counts them), unless every
// lexeme of the text that the conversation has is common: then the
// [keepCommon] rarest are. A question has common words, and matching on
// them made a search rank most of the conversation (ts_rank has no inverse
// document frequency): 30 / 82 ms p50 / p95 at 21,000 chunks and 120 / 430
// ms at 100,000, against 11 / 22 ms and 50 / 180 ms with the cut
// (bench/retrieval). They still count in the ranking of the chunks matched:
// leaving them out of it too lost three questions of the bench at 100,000
// chunks (recall@5 0.714). Recall@5 among 101,454 chunks: 10 % as before
// (0.786), 5 % and 2 % lower (0.762), though faster (p95 100 and 45 ms);
// keeping the rarest lexemes while their counts sum to at most 20 % of the
// chunks was no better than 10 % per lexeme. TestIndexRecall is unchanged
// (its 1,454 chunks are under commonMinChunks, and it is unchanged without
// it too).
var queryCTE = `WITH words AS MATERIALIZED (
	SELECT lexeme
	FROM unnest(to_tsvector('english', $2::text) || to_tsvector('english', regexp_replace($2::text, '[[:punct:]]+', ' ', 'g')))
	ORDER BY positions[1], lexeme
	LIMIT ` + maxQueryTerms + `
), freq AS MATERIALIZED (
	SELECT w.lexeme, coalesce(l.chunks, 0) AS df,
		greatest(` + commonFraction + ` * coalesce((SELECT t.chunks FROM chunk_lexemes t
			WHERE t.conversation_id = $1 AND t.lexeme = ''), 0), ` + commonMinChunks + `) AS cap
	FROM words w LEFT JOIN chunk_lexemes l ON l.conversation_id = $1 AND l.lexeme = w.lexeme COLLATE "C"
), kept AS (
	SELECT df, cap,
		'''' || replace(replace(lexeme, E'\\', E'\\\\'), '''', '''''') || '''' AS quoted,
		row_number() OVER (ORDER BY df = 0, df, lexeme) AS r,
		count(*) FILTER (WHERE df > 0 AND df <= cap) OVER () AS rare
	FROM freq
), query AS MATERIALIZED (
	SELECT string_agg(quoted, ' | ') FILTER (WHERE df <= cap OR (rare = 0 AND r <= ` + keepCommon + `))::tsquery AS q,
		string_agg(quoted, ' | ')::tsquery AS rq
	FROM kept
)
`

// The cut of common words in queryCTE (SQL literals).
const (
	commonFraction  = "0.1"
	commonMinChunks = "1000"
	keepCommon      = "2"
)

// maxQueryTerms is [retrieval.MaxQueryTerms] as an SQL literal.
var maxQueryTerms = strconv.Itoa(retrieval.MaxQueryTerms)

// dotSQL is the dot product of a chunk's vector and the query's ($3); with
// unit vectors, their cosine similarity.
const dotSQL = `(SELECT sum(a::float8 * b) FROM unnest(c.embedding, $3::real[]) t(a, b))`

// maxQueryBytes caps the text given to to_tsvector (which refuses more than
// 1 MB); a question is far shorter.
const maxQueryBytes = 64 << 10

// Query searches a conversation's indexed chunks, best first. The user's
// text is only ever split into words (no query syntax, see queryCTE); a
// chunk matches if it has any of them, ranked by ts_rank over its text,
// heading path and document name. Filters are applied in SQL, their keys and
// values bound as parameters. With an Embedder the query is also embedded and
// ranked against the conversation's vectors by dot product (exact, the best
// max(50, 5·topK), in memory or in SQL: see [Index]), and the two rankings
// are fused by
// [retrieval.Fuse]; if the embedding fails, the search falls back to full text
// and logs a warning.
//
// Errors: EINVALID for an empty query, top_k above [retrieval.MaxTopK] or
// malformed filters; others are internal.
func (ix *Index) Query(ctx context.Context, q retrieval.Query) (*retrieval.Result, error) {
	topK, f, err := retrieval.Prepare(q)
	if err != nil {
		return nil, err
	}
	res := &retrieval.Result{Sources: []retrieval.Source{}}
	var qvec []float32
	if ix.embedder != nil {
		if qvec, res.Embedding, err = retrieval.EmbedQuery(ctx, ix.embedder, ix.log, q.Text); err != nil {
			return nil, err
		}
	}

	rs := time.Now()
	defer func() { res.Retrieval = time.Since(rs) }()
	if f.Pages != nil && len(f.Pages) == 0 { // no page filter value was a page number
		return res, nil
	}
	text := queryText(q.Text)
	if qvec == nil {
		res.Sources, err = ix.textSearch(ctx, q.ConversationID, text, f, topK)
		if err != nil {
			return nil, fmt.Errorf("search documents: %w", err)
		}
		return res, nil
	}
	res.Sources, res.Hybrid, err = ix.hybridSearch(ctx, q.ConversationID, text, qvec, f, topK)
	if err != nil {
		return nil, fmt.Errorf("search documents: %w", err)
	}
	return res, nil
}

// queryText makes the user's text acceptable to PostgreSQL, which refuses
// invalid UTF-8 and NUL in text: both become spaces.
func queryText(s string) string {
	if len(s) > maxQueryBytes {
		s = s[:maxQueryBytes]
	}
	s = strings.ToValidUTF8(s, " ")
	return strings.ReplaceAll(s, "\x00", " ")
}

// sqlArgs collects the bind parameters of a statement.
type sqlArgs []any

// bind adds v and returns its placeholder.
func (a *sqlArgs) bind(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// filterSQL returns the conditions, each starting with " AND", that apply f
// to chunks c of documents d, binding every value (and metadata key).
func filterSQL(a *sqlArgs, f retrieval.Filters) string {
	var b strings.Builder
	if f.Documents != nil {
		b.WriteString(" AND d.name = ANY(" + a.bind(f.Documents) + "::text[])")
	}
	if f.DocumentIDs != nil {
		b.WriteString(" AND d.id = ANY(" + a.bind(f.DocumentIDs) + "::text[])")
	}
	if f.Pages != nil {
		b.WriteString(" AND c.page = ANY(" + a.bind(f.Pages) + "::integer[])")
	}
	if f.Sections != nil {
		b.WriteString(" AND c.heading = ANY(" + a.bind(f.Sections) + "::text[])")
	}
	keys := make([]string, 0, len(f.Meta))
	for k := range f.Meta {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the same filters give the same statement
	for _, k := range keys {
		b.WriteString(" AND d.metadata ->> " + a.bind(k) + "::text = ANY(" + a.bind(f.Meta[k]) + "::text[])")
	}
	return b.String()
}

// sourceColumns are what [scanSource] reads, after the chunk's score and
// distance.
const sourceColumns = `c.id, c.document_id, c.seq, c.page, c.heading, c.text, d.name, d.metadata`

func scanSource(row pgx.Row, score *float64, dist **float64) (retrieval.Source, error) {
	var (
		id, docID, heading, text, name string
		seq, page                      int
		meta                           map[string]string
	)
	if err := row.Scan(score, dist, &id, &docID, &seq, &page, &heading, &text, &name, record.ScanJSON(&meta)); err != nil {
		return retrieval.Source{}, err
	}
	md := retrieval.SourceMetadata(name, docID, page, heading, seq, meta)
	return retrieval.Source{ID: id, Text: text, Metadata: md}, nil
}

// textSearch ranks by full text alone and returns the best topK.
func (ix *Index) textSearch(ctx context.Context, conversationID, text string, f retrieval.Filters, topK int) ([]retrieval.Source, error) {
	a := sqlArgs{conversationID, text}
	cond := filterSQL(&a, f)
	rows, err := ix.pool.Query(ctx, queryCTE+`SELECT `+rankSQL+` AS score, NULL::float8, `+sourceColumns+`
		FROM query, chunks c JOIN documents d ON d.id = c.document_id
		WHERE d.conversation_id = $1 AND c.tsv @@ query.q`+cond+`
		ORDER BY score DESC, c.row_seq
		LIMIT `+a.bind(topK), a...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []retrieval.Source{}
	for rows.Next() {
		var score float64
		var dist *float64
		src, err := scanSource(rows, &score, &dist)
		if err != nil {
			return nil, err
		}
		src.Score = score
		out = append(out, src)
	}
	return out, rows.Err()
}

// hybridSearch ranks by full text and by vectors, fuses the rankings and
// loads the best topK. It reports whether vectors took part: not when no
// indexed chunk of the conversation has a vector of the query's dimensions
// (indexed without an embedder, or by another model) or passes the filters.
//
// The full-text ranking, the conversation's index version and, with
// document filters, the documents they select are read in one round trip;
// the vectors are then ranked in memory (loaded first when the cached
// version differs). The SQL vector ranking, for a conversation over the
// cache's budget or without a cache, is queued in that round trip when it
// is known to be needed.
func (ix *Index) hybridSearch(ctx context.Context, conversationID, text string, qvec []float32, f retrieval.Filters, topK int) ([]retrieval.Source, bool, error) {
	n := max(50, 5*topK)
	ta := sqlArgs{conversationID, text}
	tcond := filterSQL(&ta, f)
	var batch pgx.Batch
	batch.Queue(queryCTE+`SELECT c.id, `+rankSQL+` AS score
		FROM query, chunks c JOIN documents d ON d.id = c.document_id
		WHERE d.conversation_id = $1 AND c.tsv @@ query.q`+tcond+`
		ORDER BY score DESC, c.row_seq
		LIMIT `+ta.bind(n), ta...)
	cached := ix.cache != nil
	byDoc := cached && f.ByDocument()
	if cached {
		batch.Queue(versionSQL, conversationID)
		if byDoc {
			da := sqlArgs{conversationID}
			docOnly := retrieval.Filters{Documents: f.Documents, DocumentIDs: f.DocumentIDs, Meta: f.Meta}
			batch.Queue(`SELECT d.id FROM documents d WHERE d.conversation_id = $1`+filterSQL(&da, docOnly), da...)
		}
	}
	inSQL := !cached || ix.cache.tooBig(conversationID)
	if inSQL {
		sql, args := vectorRankingSQL(conversationID, qvec, f, n)
		batch.Queue(sql, args...)
	}
	var (
		textIDs, vecIDs []string
		textScore       = map[string]float64{}
		version         int64
		docs            []string // with document filters, those they select (not nil)
	)
	br := ix.pool.SendBatch(ctx, &batch)
	rows, err := br.Query()
	if err == nil {
		var id string
		var score float64
		_, err = pgx.ForEachRow(rows, []any{&id, &score}, func() error {
			textIDs = append(textIDs, id)
			textScore[id] = score
			return nil
		})
	}
	if err == nil && cached {
		err = br.QueryRow().Scan(&version)
	}
	if err == nil && byDoc {
		docs, err = collectIDs(br.Query())
	}
	if err == nil && inSQL {
		vecIDs, err = collectIDs(br.Query())
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, false, err
	}
	if cached {
		vs, err := ix.cache.get(ctx, ix.pool, conversationID, version, len(qvec))
		switch {
		case err != nil:
			return nil, false, err
		case !vs.tooBig:
			vecIDs = vs.search(qvec, n, vs.keeper(f, docs))
		case !inSQL: // over the budget since this search began
			sql, args := vectorRankingSQL(conversationID, qvec, f, n)
			if vecIDs, err = collectIDs(ix.pool.Query(ctx, sql, args...)); err != nil {
				return nil, false, err
			}
		}
	}

	hybrid := len(vecIDs) > 0
	var ranked []retrieval.Ranked
	if hybrid {
		ranked = retrieval.Fuse(topK, textIDs, vecIDs)
	} else {
		for _, id := range textIDs[:min(topK, len(textIDs))] {
			ranked = append(ranked, retrieval.Ranked{ID: id, Score: textScore[id]})
		}
	}
	if len(ranked) == 0 {
		return []retrieval.Source{}, hybrid, nil
	}
	ids := make([]string, len(ranked))
	for i, r := range ranked {
		ids[i] = r.ID
	}
	rows, err = ix.pool.Query(ctx, `SELECT 0::float8,
			CASE WHEN cardinality(c.embedding) = cardinality($3::real[]) THEN 1 - `+dotSQL+` END, `+sourceColumns+`
		FROM chunks c JOIN documents d ON d.id = c.document_id
		WHERE d.conversation_id = $1 AND c.id = ANY($2::text[]) AND c.tsv IS NOT NULL`, conversationID, ids, qvec)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	byID := make(map[string]retrieval.Source, len(ids))
	for rows.Next() {
		var score float64
		var dist *float64
		src, err := scanSource(rows, &score, &dist)
		if err != nil {
			return nil, false, err
		}
		if hybrid {
			src.Distance = dist
		}
		byID[src.ID] = src
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	out := make([]retrieval.Source, 0, len(ranked))
	for _, r := range ranked {
		src, ok := byID[r.ID]
		if !ok { // removed from the index meanwhile
			continue
		}
		src.Score = r.Score
		out = append(out, src)
	}
	return out, hybrid, nil
}

// vectorRankingSQL ranks the conversation's indexed chunks with vectors of
// qvec's dimensions by their dot product with it, in SQL, and returns the
// ids of the best n passing f.
func vectorRankingSQL(conversationID string, qvec []float32, f retrieval.Filters, n int) (string, sqlArgs) {
	a := sqlArgs{conversationID, len(qvec), qvec}
	cond := filterSQL(&a, f)
	return `SELECT c.id
		FROM chunks c JOIN documents d ON d.id = c.document_id
		WHERE d.conversation_id = $1 AND c.tsv IS NOT NULL AND cardinality(c.embedding) = $2` + cond + `
		ORDER BY ` + dotSQL + ` DESC, c.row_seq
		LIMIT ` + a.bind(n), a
}

// collectIDs reads the first column, text, of every row.
func collectIDs(rows pgx.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	ids := []string{}
	var id string
	_, err = pgx.ForEachRow(rows, []any{&id}, func() error {
		ids = append(ids, id)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}
