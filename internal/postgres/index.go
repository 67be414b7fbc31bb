package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"datachat"
	"datachat/internal/retrieval"
)

var _ retrieval.Backend = (*Index)(nil)

// IndexOptions configure [NewIndex].
type IndexOptions struct {
	// Embedder, if not nil, adds vector search to full-text search.
	Embedder retrieval.Embedder
	// Logger gets warnings (a failed query embedding); nil discards them.
	Logger *slog.Logger
	// CacheBytes is the memory the index keeps conversations' vectors in
	// (with an Embedder): 0 means [DefaultCacheBytes]; negative keeps none,
	// ranking vectors in SQL.
	CacheBytes int64
}

// Index is a [retrieval.Backend] on the store's own tables: PostgreSQL
// full-text search over the chunks [Store.CreateDocument] stored, so that
// every server process on one database searches one index and sees another's
// adds and deletes at once. Its only state is a cache of vectors, checked
// against the database on every search (below). It is safe for concurrent
// use.
//
// The chunks are stored once, in the chunks table; [Index.Add] makes a stored
// document's chunks searchable by filling their tsv column (the chunk's text,
// heading path and document name, weighted A, B and C, with the 'english'
// configuration: see migration 0003) and, with an Embedder, their embedding
// (a unit vector, real[]). Deleting from the index clears those columns and
// leaves the stored records to the store.
//
// Differences from the embedded [retrieval.Index], which ranks by BM25:
// PostgreSQL's ts_rank has no inverse document frequency, the 'english'
// configuration stems with Snowball (Porter 2) rather than Porter and does not
// fold diacritics (no unaccent: it is an extension), and its stop words differ
// slightly.
//
// Vectors are searched exactly (no pgvector), by a dot product computed in
// Go over the conversation's vectors, which the index keeps in memory: the
// same ranking in SQL takes about 40 µs per chunk with 256 dimensions (4 s at
// 100,000 chunks), the scan in Go a few milliseconds. The cache is checked on
// every search against the conversation's index version (migration 0004),
// which every Add and delete changes in its transaction, read in the round
// trip of the full-text ranking: a changed or absent version reloads the
// conversation's vectors with their version from one snapshot, concurrent
// searches sharing the load. So a search sees what another process indexed
// or deleted before it began, as it does with full text. The cache holds
// [IndexOptions.CacheBytes], dropping the least recently searched
// conversation first; a conversation whose vectors alone are over it is not
// loaded, and its vectors are ranked in SQL. A vector of a chunk deleted
// without a version change (the store's own delete, until the workspace
// deletes the document from the index) can take a place in the vector
// ranking but never becomes a source: sources are read from the chunks
// table, indexed chunks only.
//
// Cost: the question's words are OR-ed, so a search ranks every chunk of the
// conversation that has any of them, about 2–5 µs per matching chunk. Words
// common in the conversation are therefore not matched on, only ranked by
// (see queryCTE; the index keeps per-conversation lexeme counts, migration
// 0006, which Add and the deletes maintain): p50 / p95 11 / 22 ms at 21,000
// chunks (30 / 82 ms matching all words), 50 / 180 ms at 100,000 (120 / 430
// ms; medians of bench/retrieval runs). Chunks are scoped
// through their document (documents.conversation_id): a copy of the
// conversation id on chunks was measured and made small conversations
// slower, the planner then intersecting the whole table's GIN matches with
// it.
type Index struct {
	pool     *db
	embedder retrieval.Embedder
	log      *slog.Logger
	cache    *vectorCache // nil without an embedder or with CacheBytes < 0
}

// NewIndex returns the search index on s's database. The schema must be
// migrated ([Store.Migrate]).
func NewIndex(s *Store, opts IndexOptions) *Index {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ix := &Index{pool: s.pool, embedder: opts.Embedder, log: log}
	if opts.Embedder != nil && opts.CacheBytes >= 0 {
		budget := opts.CacheBytes
		if budget == 0 {
			budget = DefaultCacheBytes
		}
		ix.cache = newVectorCache(budget)
	}
	return ix
}

// HasVectors reports whether the index embeds chunks (an Embedder is set).
func (ix *Index) HasVectors() bool { return ix.embedder != nil }

// Add makes the chunks of doc that the store holds searchable in the
// conversation: the workspace calls [Store.CreateDocument] first, and chunks
// is not read (the stored chunks are what is indexed). With an Embedder the
// stored chunks are embedded first; if that fails nothing of the document
// becomes searchable. Adding a document again indexes it again.
//
// Errors: EINVALID for a missing conversation id, document id or name;
// ENOTFOUND when the conversation has no such stored document; the embedder's
// error (wrapped) when embedding fails; ECONFLICT when the document was
// replaced while its chunks were being embedded; others are internal.
func (ix *Index) Add(ctx context.Context, conversationID string, doc *datachat.Document, _ []*datachat.Chunk) error {
	if err := retrieval.CheckDocument(conversationID, doc); err != nil {
		return err
	}
	var (
		ids     []string
		vecs    []float32 // the chunks' vectors end to end
		dim     int
		version int64 // the document row's row_seq, new when it is replaced
	)
	if ix.embedder != nil {
		var stored []*datachat.Chunk
		var err error
		version, stored, err = ix.storedChunks(ctx, conversationID, doc.ID)
		if err != nil {
			return fmt.Errorf("index document %q: %w", doc.Name, err)
		}
		if len(stored) > 0 {
			vv, err := retrieval.EmbedChunks(ctx, ix.embedder, stored)
			if err != nil {
				return fmt.Errorf("embed chunks of %q: %w", doc.Name, err)
			}
			dim = len(vv[0])
			vecs = make([]float32, 0, dim*len(vv))
			for i, v := range vv {
				ids = append(ids, stored[i].ID)
				vecs = append(vecs, v...)
			}
		}
	}
	err := pgx.BeginFunc(ctx, ix.pool, func(tx pgx.Tx) error {
		name, rowSeq, err := lockDocument(ctx, tx, conversationID, doc.ID)
		if err != nil {
			return err
		}
		if ix.embedder != nil && rowSeq != version {
			return datachat.Errorf(datachat.ECONFLICT, "document %q was replaced while it was being indexed", doc.ID)
		}
		// The lexeme counts (migration 0006): the document's indexed chunks
		// as they were are subtracted, as they are now added.
		if err := lockLexemes(ctx, tx, conversationID); err != nil {
			return err
		}
		if err := applyLexemes(ctx, tx, conversationID, doc.ID, -1); err != nil {
			return err
		}
		if ids == nil {
			_, err := tx.Exec(ctx, `UPDATE chunks SET tsv = chunk_tsvector(text, heading, $2), embedding = NULL
				WHERE document_id = $1`, doc.ID, name)
			if err != nil {
				return err
			}
			if err := applyLexemes(ctx, tx, conversationID, doc.ID, 1); err != nil {
				return err
			}
			return bumpVersion(ctx, tx, conversationID)
		}
		// Chunk i's vector is vecs[(i-1)*dim+1 : i*dim] (arrays count from 1).
		tag, err := tx.Exec(ctx, `UPDATE chunks c
			SET tsv = chunk_tsvector(c.text, c.heading, $2), embedding = ($3::real[])[(v.n - 1) * $4 + 1 : v.n * $4]
			FROM unnest($5::text[]) WITH ORDINALITY v(id, n)
			WHERE c.document_id = $1 AND c.id = v.id`, doc.ID, name, vecs, dim, ids)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != int64(len(ids)) {
			return fmt.Errorf("%d chunks embedded, %d updated", len(ids), tag.RowsAffected())
		}
		if err := applyLexemes(ctx, tx, conversationID, doc.ID, 1); err != nil {
			return err
		}
		return bumpVersion(ctx, tx, conversationID)
	})
	ix.dropCached(conversationID)
	if err != nil {
		return fmt.Errorf("index document %q: %w", doc.Name, err)
	}
	return nil
}

// lockConversation locks the conversation row against deletion until
// commit, before any other lock of the transaction: [bumpVersion]'s foreign
// key check would otherwise wait for a deletion of the conversation that
// waits for the transaction's locks on its documents or chunks. It returns
// pgx.ErrNoRows when there is no such conversation.
func lockConversation(ctx context.Context, tx pgx.Tx, conversationID string) error {
	var ok bool
	return tx.QueryRow(ctx, `SELECT true FROM conversations WHERE id = $1 FOR KEY SHARE`, conversationID).Scan(&ok)
}

// lockDocument locks the conversation ([lockConversation]) and the
// document row until commit, and so its chunks as they are: deleting or
// replacing them waits. It returns the document's name and row_seq, or
// ENOTFOUND when the conversation has no such document.
func lockDocument(ctx context.Context, tx pgx.Tx, conversationID, documentID string) (name string, rowSeq int64, err error) {
	if err := lockConversation(ctx, tx, conversationID); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return "", 0, notStored(documentID)
		}
		return "", 0, err
	}
	err = tx.QueryRow(ctx, `SELECT name, row_seq FROM documents WHERE id = $1 AND conversation_id = $2 FOR SHARE`,
		documentID, conversationID).Scan(&name, &rowSeq)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, notStored(documentID)
	}
	return name, rowSeq, err
}

// bumpVersion gives the conversation a new index version, as the last
// statement of a transaction that changes its indexed chunks, after
// [lockConversation].
func bumpVersion(ctx context.Context, tx pgx.Tx, conversationID string) error {
	_, err := tx.Exec(ctx, `INSERT INTO index_versions (conversation_id, version) VALUES ($1, nextval('index_version_seq'))
		ON CONFLICT (conversation_id) DO UPDATE SET version = excluded.version`, conversationID)
	return err
}

// lockLexemes locks the conversation's lexeme counts (migration 0006) until
// commit, after [lockConversation] and any lock of a document: every change
// of the counts takes this lock first, so that what a transaction reads of
// the chunks after it is what it changes.
func lockLexemes(ctx context.Context, tx pgx.Tx, conversationID string) error {
	_, err := tx.Exec(ctx, `SELECT chunk_lexemes_lock($1)`, conversationID)
	return err
}

// applyLexemes adds (sign 1) or subtracts (-1) the document's indexed chunks
// to the conversation's lexeme counts, after [lockLexemes].
func applyLexemes(ctx context.Context, tx pgx.Tx, conversationID, documentID string, sign int) error {
	_, err := tx.Exec(ctx, `SELECT chunk_lexemes_apply($1, $2, $3)`, conversationID, documentID, sign)
	return err
}

// dropCached frees the memory of a conversation's cached vectors after this
// process changed its index (their version is out of date).
func (ix *Index) dropCached(conversationID string) {
	if ix.cache != nil {
		ix.cache.drop(conversationID)
	}
}

func notStored(documentID string) error {
	return datachat.Errorf(datachat.ENOTFOUND, "document %q is not stored in the conversation", documentID)
}

// storedChunks returns the chunks of a stored document, as embedding needs
// them, in order, and the document row's row_seq; ENOTFOUND if the
// conversation has no such document.
func (ix *Index) storedChunks(ctx context.Context, conversationID, documentID string) (int64, []*datachat.Chunk, error) {
	rows, err := ix.pool.Query(ctx, `SELECT d.row_seq, c.id, c.seq, c.heading, c.text
		FROM documents d LEFT JOIN chunks c ON c.document_id = d.id
		WHERE d.id = $1 AND d.conversation_id = $2
		ORDER BY c.seq, c.row_seq`, documentID, conversationID)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	found := false
	var (
		version int64
		chunks  []*datachat.Chunk
	)
	for rows.Next() {
		var (
			id, heading, text *string
			seq               *int
		)
		if err := rows.Scan(&version, &id, &seq, &heading, &text); err != nil {
			return 0, nil, err
		}
		found = true
		if id != nil { // the LEFT JOIN gives a document without chunks one row of NULLs
			chunks = append(chunks, &datachat.Chunk{ID: *id, DocumentID: documentID, Seq: *seq, Heading: *heading, Text: *text})
		}
	}
	if err := rows.Err(); err != nil {
		return 0, nil, err
	}
	if !found {
		return 0, nil, notStored(documentID)
	}
	return version, chunks, nil
}

// Documents returns the ids of the conversation's indexed documents:
// stored documents with at least one indexed chunk.
func (ix *Index) Documents(ctx context.Context, conversationID string) ([]string, error) {
	rows, err := ix.pool.Query(ctx, `SELECT d.id FROM documents d
		WHERE d.conversation_id = $1
			AND EXISTS (SELECT 1 FROM chunks c WHERE c.document_id = d.id AND c.tsv IS NOT NULL)
		ORDER BY d.id`, conversationID)
	if err != nil {
		return nil, fmt.Errorf("list indexed documents: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list indexed documents: %w", err)
	}
	if ids == nil {
		ids = []string{}
	}
	return ids, nil
}

// DeleteDocument makes a document's chunks unsearchable (the store deletes
// the records). Deleting a document that is not indexed is not an error.
// The version changes even when no chunk is left to clear: the workspace
// deletes the document from the store first, which deletes its chunks
// without changing the version.
func (ix *Index) DeleteDocument(ctx context.Context, conversationID, documentID string) error {
	err := ix.unindex(ctx, conversationID, func(tx pgx.Tx) error {
		// The document, if still stored, is in the conversation: the
		// counts are only changed for chunks the update clears.
		var n int
		err := tx.QueryRow(ctx, `SELECT count(*) FROM documents WHERE id = $1 AND conversation_id = $2`, documentID, conversationID).Scan(&n)
		if err != nil || n == 0 {
			return err
		}
		return applyLexemes(ctx, tx, conversationID, documentID, -1)
	}, `UPDATE chunks c SET tsv = NULL, embedding = NULL
		FROM documents d
		WHERE d.id = c.document_id AND d.id = $2 AND d.conversation_id = $1
			AND (c.tsv IS NOT NULL OR c.embedding IS NOT NULL)`, documentID)
	if err != nil {
		return fmt.Errorf("delete document %s from index: %w", documentID, err)
	}
	return nil
}

// DeleteConversation makes every chunk of the conversation unsearchable.
func (ix *Index) DeleteConversation(ctx context.Context, conversationID string) error {
	err := ix.unindex(ctx, conversationID, func(tx pgx.Tx) error {
		// Nothing of the conversation stays indexed.
		_, err := tx.Exec(ctx, `DELETE FROM chunk_lexemes WHERE conversation_id = $1 AND lexeme <> ''`, conversationID)
		if err == nil {
			_, err = tx.Exec(ctx, `UPDATE chunk_lexemes SET chunks = 0 WHERE conversation_id = $1 AND lexeme = ''`, conversationID)
		}
		return err
	}, `UPDATE chunks c SET tsv = NULL, embedding = NULL
		FROM documents d
		WHERE d.id = c.document_id AND d.conversation_id = $1
			AND (c.tsv IS NOT NULL OR c.embedding IS NOT NULL)`)
	if err != nil {
		return fmt.Errorf("delete conversation %s from index: %w", conversationID, err)
	}
	return nil
}

// unindex runs counts, which updates the conversation's lexeme counts for
// the chunks update will clear, then update, which clears chunks of the
// conversation ($1), and changes the conversation's version, in one
// transaction. A conversation that no longer exists has nothing left to
// clear (its chunks, counts and version went with it).
func (ix *Index) unindex(ctx context.Context, conversationID string, counts func(pgx.Tx) error, update string, args ...any) error {
	err := pgx.BeginFunc(ctx, ix.pool, func(tx pgx.Tx) error {
		if err := lockConversation(ctx, tx, conversationID); err != nil {
			return err
		}
		if err := lockLexemes(ctx, tx, conversationID); err != nil {
			return err
		}
		if err := counts(tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, update, append([]any{conversationID}, args...)...); err != nil {
			return err
		}
		return bumpVersion(ctx, tx, conversationID)
	})
	ix.dropCached(conversationID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}
