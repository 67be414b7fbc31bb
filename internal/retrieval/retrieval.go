// Package retrieval chunks extracted documents and finds the chunks that
// answer a question: full-text search ranked by BM25 that needs nothing
// installed, plus vector search fused by reciprocal rank when an embedding
// model is configured.
//
// Chunks, their documents' names and metadata, and their vectors are stored
// in one SQLite file (modernc.org/sqlite, pure Go). Searching uses an
// in-memory index per conversation, built from that file on the first search
// and kept up to date as documents are added: an inverted index (words
// lower-cased, diacritics folded, English stop words dropped,
// Porter-stemmed) ranked by BM25, and the conversation's vectors, searched
// exactly by brute-force cosine. Indexes of recently searched conversations
// stay in memory within a budget ([Options.CacheBytes]).
//
// SQLite's own FTS5 was the first choice and was measured: through the pure
// Go driver, bm25() costs about 2 µs per matching row, and a question's
// words (OR-ed, as ranking needs) match most chunks, so a search took 20–60
// ms at 20,000 chunks and would take 100–300 ms at 100,000. The in-memory
// index answers in a few milliseconds at 100,000 chunks (BENCHMARKS-retrieval.md).
//
// Typical use: [extract.Extract] the upload, [Chunk] it, [Index.Add] the
// chunks, and later [Index.Search] (or [Index.Query] for timings). The HTTP
// layer checks user filters with [CheckFilters] first.
package retrieval

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"datachat"
	sqlitedb "datachat/internal/sqlite"
)

// Embedder turns texts into vectors. Search
// embeds one query at a time; Add embeds chunks in batches of [EmbedBatch].
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Options configure [Open].
type Options struct {
	// Path is the index's SQLite file, e.g. DATA_DIR/index.db. Its directory
	// is created if needed.
	Path string
	// Embedder, if not nil, adds vector search to full-text search.
	Embedder Embedder
	// Logger gets warnings (a failed query embedding); nil discards them.
	Logger *slog.Logger
	// CacheBytes caps the memory held by the in-memory indexes of recently
	// searched conversations; 0 means 512 MiB. An index takes about two
	// thirds of its chunks' text in size, plus 4 bytes per vector dimension
	// and chunk (100,000 chunks of 1 kB: 66 MB; with 768-dim vectors, 436 MB).
	CacheBytes int64
}

// EmbedBatch is the number of chunk texts sent to the embedder at once.
const EmbedBatch = 64

// Index is the retrieval index. It is safe for concurrent use: searches run
// in parallel with each other and with one writer.
type Index struct {
	path     string
	write    *sql.DB // one connection
	read     *sql.DB
	embedder Embedder
	log      *slog.Logger
	cache    *indexCache
}

// migrationFS holds the index's schema, applied by Open as the stores apply
// theirs ([sqlitedb.ApplyMigrations]).
//
//go:embed migration/*.sql
var migrationFS embed.FS

// Open opens (creating if needed) the index at opts.Path.
func Open(ctx context.Context, opts Options) (*Index, error) {
	path := opts.Path
	if path == "" || path == ":memory:" || strings.ContainsRune(path, '?') || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("open retrieval index: %q: want the path of a file", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open retrieval index: %w", err)
	}
	write, read, err := sqlitedb.Pools(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("open retrieval index: %w", err)
	}
	if err := sqlitedb.ApplyMigrations(ctx, write, migrationFS); err != nil {
		write.Close()
		read.Close()
		return nil, fmt.Errorf("open retrieval index %s: %w", path, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	budget := opts.CacheBytes
	if budget <= 0 {
		budget = 512 << 20
	}
	return &Index{
		path:     path,
		write:    write,
		read:     read,
		embedder: opts.Embedder,
		log:      log,
		cache:    newIndexCache(budget),
	}, nil
}

// Close closes the index.
func (ix *Index) Close() error {
	return errors.Join(ix.read.Close(), ix.write.Close())
}

// HasVectors reports whether the index embeds chunks (an Embedder is set).
func (ix *Index) HasVectors() bool { return ix.embedder != nil }

// Add indexes the chunks of doc in the conversation, replacing any chunks the
// document had. doc supplies the name, media type and metadata that search
// results carry and filters match. With an Embedder, the chunks are embedded
// first; if that fails, nothing of the document stays indexed.
//
// Errors: EINVALID for a document without an id or name; the embedder's error
// (wrapped) when embedding fails; others are internal.
func (ix *Index) Add(ctx context.Context, conversationID string, doc *datachat.Document, chunks []*datachat.Chunk) error {
	if err := CheckDocument(conversationID, doc); err != nil {
		return err
	}
	var vecs [][]float32
	if ix.embedder != nil && len(chunks) > 0 {
		var err error
		if vecs, err = EmbedChunks(ctx, ix.embedder, chunks); err != nil {
			// Nothing of the document stays searchable, not even an earlier version.
			if derr := ix.DeleteDocument(context.WithoutCancel(ctx), conversationID, doc.ID); derr != nil {
				ix.log.WarnContext(ctx, "removing a document after a failed add failed", slog.String("document_id", doc.ID), slog.Any("error", derr))
			}
			return fmt.Errorf("embed chunks of %q: %w", doc.Name, err)
		}
	}
	return ix.add(ctx, conversationID, doc, chunks, vecs)
}

// add indexes the chunks of doc with their vectors (nil: none), replacing
// any chunks the document had.
func (ix *Index) add(ctx context.Context, conversationID string, doc *datachat.Document, chunks []*datachat.Chunk, vecs [][]float32) error {
	rows := make([]chunkRow, len(chunks))
	replaced := false
	err := ix.writeTx(ctx, func(tx *sql.Tx) error {
		n, err := deleteDocument(ctx, tx, conversationID, doc.ID)
		if err != nil {
			return err
		}
		replaced = n > 0
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO documents (conversation_id, id, name, media_type) VALUES (?, ?, ?, ?)`,
			conversationID, doc.ID, doc.Name, doc.MediaType); err != nil {
			return err
		}
		for k, v := range doc.Metadata {
			if _, err := tx.ExecContext(ctx,
				`INSERT INTO document_metadata (conversation_id, document_id, key, value) VALUES (?, ?, ?, ?)`,
				conversationID, doc.ID, k, v); err != nil {
				return err
			}
		}
		ins, err := tx.PrepareContext(ctx, `INSERT INTO chunks
			(conversation_id, document_id, id, seq, page, heading, start_offset, end_offset, text, vector)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer ins.Close()
		for i, c := range chunks {
			id := ChunkID(doc.ID, c)
			var blob []byte
			if vecs != nil {
				blob = encodeVector(vecs[i])
			}
			res, err := ins.ExecContext(ctx, conversationID, doc.ID, id, c.Seq, c.Page, c.Heading, c.Start, c.End, c.Text, blob)
			if err != nil {
				return err
			}
			rowid, err := res.LastInsertId()
			if err != nil {
				return err
			}
			rows[i] = chunkRow{rowid: rowid, docID: doc.ID, name: doc.Name, page: c.Page, heading: c.Heading, text: c.Text}
			if vecs != nil {
				rows[i].vector = vecs[i]
			}
		}
		return nil
	})
	if err != nil || replaced {
		ix.cache.invalidate(conversationID)
	} else {
		ix.cache.appendRows(conversationID, rows)
	}
	if err != nil {
		return fmt.Errorf("index document %q: %w", doc.Name, err)
	}
	return nil
}

// Documents returns the ids of the conversation's indexed documents.
func (ix *Index) Documents(ctx context.Context, conversationID string) ([]string, error) {
	rows, err := ix.read.QueryContext(ctx, `SELECT id FROM documents WHERE conversation_id = ? ORDER BY id`, conversationID)
	if err != nil {
		return nil, fmt.Errorf("list indexed documents: %w", err)
	}
	defer rows.Close()
	ids := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list indexed documents: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list indexed documents: %w", err)
	}
	return ids, nil
}

// DeleteDocument removes a document's chunks from the conversation's index.
// Deleting a document that is not indexed is not an error.
func (ix *Index) DeleteDocument(ctx context.Context, conversationID, documentID string) error {
	err := ix.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := deleteDocument(ctx, tx, conversationID, documentID)
		return err
	})
	ix.cache.invalidate(conversationID)
	if err != nil {
		return fmt.Errorf("delete document %s from index: %w", documentID, err)
	}
	return nil
}

// DeleteConversation removes every document of the conversation.
func (ix *Index) DeleteConversation(ctx context.Context, conversationID string) error {
	err := ix.writeTx(ctx, func(tx *sql.Tx) error {
		for _, q := range []string{
			`DELETE FROM chunks WHERE conversation_id = ?`,
			`DELETE FROM document_metadata WHERE conversation_id = ?`,
			`DELETE FROM documents WHERE conversation_id = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, conversationID); err != nil {
				return err
			}
		}
		return nil
	})
	ix.cache.invalidate(conversationID)
	if err != nil {
		return fmt.Errorf("delete conversation %s from index: %w", conversationID, err)
	}
	return nil
}

// deleteDocument deletes a document's rows and returns how many chunks it had.
func deleteDocument(ctx context.Context, tx *sql.Tx, conversationID, documentID string) (int64, error) {
	res, err := tx.ExecContext(ctx, `DELETE FROM chunks WHERE conversation_id = ? AND document_id = ?`, conversationID, documentID)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	var docs int64
	for _, q := range []string{
		`DELETE FROM document_metadata WHERE conversation_id = ? AND document_id = ?`,
		`DELETE FROM documents WHERE conversation_id = ? AND id = ?`,
	} {
		res, err := tx.ExecContext(ctx, q, conversationID, documentID)
		if err != nil {
			return 0, err
		}
		docs, _ = res.RowsAffected()
	}
	return n + docs, nil
}

// writeTx runs fn in a write transaction. A write that failed because the
// disk is full is datachat.NoSpace: the server's condition, not a bug.
func (ix *Index) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := ix.write.BeginTx(ctx, nil)
	if err != nil {
		return datachat.ClassifyNoSpace(fmt.Errorf("begin: %w", err))
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return datachat.ClassifyNoSpace(err)
	}
	if err := tx.Commit(); err != nil {
		return datachat.ClassifyNoSpace(fmt.Errorf("commit: %w", err))
	}
	return nil
}

func embedText(c *datachat.Chunk) string {
	if c.Heading == "" {
		return c.Text
	}
	return c.Heading + "\n\n" + c.Text
}
