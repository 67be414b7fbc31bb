package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"datachat/internal/retrieval"
)

// DefaultCacheBytes is the memory [Index] keeps conversations' vectors in
// when [IndexOptions.CacheBytes] is 0.
const DefaultCacheBytes = 256 << 20

// versionSQL reads a conversation's index version (migration 0004): 0 when
// it has none, as a conversation that never had an indexed chunk.
const versionSQL = `SELECT coalesce((SELECT version FROM index_versions WHERE conversation_id = $1), 0)`

// vectorSet is one conversation's indexed vectors of one dimension as of one
// index version, with what the page and section filters need and the
// chunks' row_seq, by which ties are broken as in SQL. It is not modified
// once built, so searches read it without locks.
type vectorSet struct {
	version int64
	dim     int
	// tooBig marks a conversation over the cache's budget: nothing is
	// loaded and its vectors are ranked in SQL.
	tooBig   bool
	ids      []string
	rowSeqs  []int64
	docs     []int32 // index into docIDs
	pages    []int32
	headings []string
	docIDs   []string
	docIdx   map[string]int32
	data     []float32 // the unit vectors end to end
	bytes    int64
}

// perChunkBytes is the memory a chunk takes in a vectorSet besides its
// vector and strings: its id and heading string headers, row_seq, document
// and page.
const perChunkBytes = 16 + 8 + 4 + 4 + 16

// estimateBytes is what a conversation of n chunks with vectors of dim takes,
// assuming ids of 40 bytes and a heading per chunk of 40, before loading it.
func estimateBytes(n, dim int) int64 {
	return int64(n) * int64(4*dim+perChunkBytes+40+40)
}

// vectorCache keeps the vectors of recently searched conversations within a
// memory budget, dropping the least recently used first. Each entry is
// checked against the conversation's index version by the caller, so that
// what other processes index or delete is seen by the next search.
type vectorCache struct {
	budget int64

	mu      sync.Mutex
	used    int64
	tick    uint64 // orders uses, for eviction
	seq     uint64 // numbers loads in the order they start
	entries map[string]*cacheEntry
	loading map[string]*vectorLoad
	loads   atomic.Int64 // loads started, for tests
}

type cacheEntry struct {
	vs       *vectorSet
	seq      uint64 // of the load that made it
	lastUsed uint64
}

// vectorLoad is a load in progress; concurrent searches of the conversation
// wait for it rather than loading again.
type vectorLoad struct {
	done chan struct{}
	seq  uint64
	vs   *vectorSet
	err  error
}

func newVectorCache(budget int64) *vectorCache {
	return &vectorCache{budget: budget, entries: map[string]*cacheEntry{}, loading: map[string]*vectorLoad{}}
}

// tooBig reports whether the conversation was over the budget when last
// loaded: the search then queues the SQL ranking at once.
func (c *vectorCache) tooBig(conversationID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[conversationID]
	return e != nil && e.vs.tooBig
}

// drop forgets a conversation after this process changed its index; the
// entry would be reloaded anyway, its version being out of date.
func (c *vectorCache) drop(conversationID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[conversationID]; e != nil {
		c.used -= e.vs.bytes
		delete(c.entries, conversationID)
	}
}

// get returns the conversation's vectors of dim at version, the version the
// caller read from the database, or newer ones: those of a load that started
// after the caller read its version (a version names one state, and a later
// snapshot has every change committed before the caller's read). Concurrent
// callers share one load, which runs without the callers' cancellation and
// ends on its own; a caller whose context ends stops waiting for it.
func (c *vectorCache) get(ctx context.Context, pool *db, conversationID string, version int64, dim int) (*vectorSet, error) {
	c.mu.Lock()
	after := c.seq
	for {
		fresh := func(vs *vectorSet, seq uint64) bool {
			return vs.dim == dim && (vs.version == version || seq > after)
		}
		c.tick++
		if e := c.entries[conversationID]; e != nil && fresh(e.vs, e.seq) {
			e.lastUsed = c.tick
			c.mu.Unlock()
			return e.vs, nil
		}
		l := c.loading[conversationID]
		if l == nil {
			c.seq++
			l = &vectorLoad{done: make(chan struct{}), seq: c.seq}
			c.loading[conversationID] = l
			go c.load(ctx, pool, conversationID, dim, l)
		}
		c.mu.Unlock()
		select {
		case <-l.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if l.err != nil {
			return nil, l.err
		}
		if fresh(l.vs, l.seq) {
			return l.vs, nil
		}
		// A load that started before the caller's read, of another
		// version or dimension: wait for or start one that did not.
		c.mu.Lock()
	}
}

// loadTimeout bounds a load, which no caller can cancel.
const loadTimeout = 5 * time.Minute

// load runs a load and caches its result. Loads of one conversation do not
// overlap, so the last to finish is the newest.
func (c *vectorCache) load(ctx context.Context, pool *db, conversationID string, dim int, l *vectorLoad) {
	c.loads.Add(1)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
	vs, err := loadVectors(ctx, pool, conversationID, dim, c.budget)
	cancel()
	c.mu.Lock()
	delete(c.loading, conversationID)
	l.vs, l.err = vs, err
	if err == nil {
		c.putLocked(conversationID, vs, l.seq)
	}
	c.mu.Unlock()
	close(l.done)
}

// putLocked caches vs, evicting the least recently used conversations to
// make room. A set over the budget (its size estimated too low before
// loading) is kept as a tooBig mark. The caller holds mu.
func (c *vectorCache) putLocked(conversationID string, vs *vectorSet, seq uint64) {
	if old := c.entries[conversationID]; old != nil {
		c.used -= old.vs.bytes
		delete(c.entries, conversationID)
	}
	if vs.bytes > c.budget {
		vs = &vectorSet{version: vs.version, dim: vs.dim, tooBig: true}
	}
	for c.used+vs.bytes > c.budget && len(c.entries) > 0 {
		c.evictLocked()
	}
	c.tick++
	c.entries[conversationID] = &cacheEntry{vs: vs, seq: seq, lastUsed: c.tick}
	c.used += vs.bytes
}

// evictLocked drops the least recently used entry.
func (c *vectorCache) evictLocked() {
	var oldest string
	var least uint64 = math.MaxUint64
	for id, e := range c.entries {
		if e.lastUsed < least {
			oldest, least = id, e.lastUsed
		}
	}
	if e := c.entries[oldest]; e != nil {
		c.used -= e.vs.bytes
		delete(c.entries, oldest)
	}
}

// loadVectors reads the conversation's index version and its indexed
// chunks' vectors of dim in one snapshot (a REPEATABLE READ, read-only
// transaction). A conversation whose vectors would take more than budget is
// not read: the set returned is marked tooBig.
func loadVectors(ctx context.Context, pool *db, conversationID string, dim int, budget int64) (*vectorSet, error) {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("load vectors: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	vs := &vectorSet{dim: dim, docIdx: map[string]int32{}}
	// The documents' chunk counts, kept by the store, are an estimate from
	// above of the indexed chunks with vectors that costs no scan of them.
	var n int
	err = tx.QueryRow(ctx, versionSQL+`, (SELECT coalesce(sum(chunks), 0) FROM documents WHERE conversation_id = $1)`,
		conversationID).Scan(&vs.version, &n)
	if err != nil {
		return nil, fmt.Errorf("load vectors: %w", err)
	}
	if estimateBytes(n, dim) > budget {
		return &vectorSet{version: vs.version, dim: dim, tooBig: true}, nil
	}
	// Not sorted: sorting 100,000 rows with their vectors spills to disk;
	// row_seq is kept instead.
	rows, err := tx.Query(ctx, `SELECT c.id, c.row_seq, c.document_id, c.page, c.heading, c.embedding
		FROM chunks c JOIN documents d ON d.id = c.document_id
		WHERE d.conversation_id = $1 AND c.tsv IS NOT NULL AND cardinality(c.embedding) = $2`, conversationID, dim)
	if err != nil {
		return nil, fmt.Errorf("load vectors: %w", err)
	}
	defer rows.Close()
	if f := rows.FieldDescriptions(); len(f) != 6 || f[5].Format != pgx.BinaryFormatCode || f[5].DataTypeOID != pgtype.Float4ArrayOID {
		return nil, fmt.Errorf("load vectors: embeddings not sent as binary real[]")
	}
	vs.ids = make([]string, 0, n)
	vs.rowSeqs = make([]int64, 0, n)
	vs.docs = make([]int32, 0, n)
	vs.pages = make([]int32, 0, n)
	vs.headings = make([]string, 0, n)
	vs.data = make([]float32, 0, n*dim)
	var strBytes int64
	for rows.Next() {
		var (
			rowSeq int64
			page   int32
		)
		if err := rows.Scan(nil, &rowSeq, nil, &page, nil, nil); err != nil {
			return nil, fmt.Errorf("load vectors: %w", err)
		}
		// Text comes as its bytes in either format.
		raw := rows.RawValues()
		id, doc, heading := raw[0], raw[2], raw[4]
		d, ok := vs.docIdx[string(doc)]
		if !ok {
			d = int32(len(vs.docIDs))
			vs.docIDs = append(vs.docIDs, string(doc))
			vs.docIdx[vs.docIDs[d]] = d
			strBytes += int64(len(doc)) + 64
		}
		// Chunks of a section share their heading: keep one copy.
		h := ""
		if k := len(vs.headings); k > 0 && vs.headings[k-1] == string(heading) {
			h = vs.headings[k-1]
		} else if len(heading) > 0 {
			h = string(heading)
			strBytes += int64(len(h))
		}
		if vs.data, err = appendFloat4Array(vs.data, raw[5], dim); err != nil {
			return nil, fmt.Errorf("load vectors: chunk %s: %w", id, err)
		}
		vs.ids = append(vs.ids, string(id))
		vs.rowSeqs = append(vs.rowSeqs, rowSeq)
		vs.docs = append(vs.docs, d)
		vs.pages = append(vs.pages, page)
		vs.headings = append(vs.headings, h)
		strBytes += int64(len(id))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load vectors: %w", err)
	}
	vs.bytes = int64(len(vs.ids))*perChunkBytes + int64(cap(vs.data))*4 + strBytes
	return vs, nil
}

// appendFloat4Array appends the elements of a one-dimensional real[] of dim
// elements in PostgreSQL's binary array format (array_send: dimensions,
// flags, element type, then per dimension its length and lower bound, then
// per element its length, -1 for NULL, and its bytes, big-endian). A NULL
// element counts as 0, as the SQL sum skips it.
func appendFloat4Array(dst []float32, b []byte, dim int) ([]float32, error) {
	if len(b) < 20 {
		return dst, fmt.Errorf("array of %d bytes", len(b))
	}
	be := binary.BigEndian
	ndim, elemOID := be.Uint32(b), be.Uint32(b[8:])
	if ndim != 1 || elemOID != pgtype.Float4OID || int(int32(be.Uint32(b[12:]))) != dim {
		return dst, fmt.Errorf("want a real[] of %d elements", dim)
	}
	p := b[20:]
	if len(p) == 8*dim { // no NULL
		k := len(dst)
		dst = slices.Grow(dst, dim)[:k+dim]
		out := dst[k:]
		for i := range out {
			e := p[8*i : 8*i+8 : 8*i+8]
			if be.Uint32(e) != 4 {
				return dst[:k], fmt.Errorf("array element of %d bytes", int32(be.Uint32(e)))
			}
			out[i] = math.Float32frombits(be.Uint32(e[4:]))
		}
		return dst, nil
	}
	for range dim {
		if len(p) < 4 {
			return dst, fmt.Errorf("array truncated")
		}
		switch n := int32(be.Uint32(p)); n {
		case -1:
			dst = append(dst, 0)
			p = p[4:]
		case 4:
			if len(p) < 8 {
				return dst, fmt.Errorf("array truncated")
			}
			dst = append(dst, math.Float32frombits(be.Uint32(p[4:])))
			p = p[8:]
		default:
			return dst, fmt.Errorf("array element of %d bytes", n)
		}
	}
	return dst, nil
}

// keeper returns the test a chunk must pass under f: its document in docs
// (nil: any document) and its page and section matching; nil when nothing
// is filtered.
func (vs *vectorSet) keeper(f retrieval.Filters, docs []string) func(i int) bool {
	if docs == nil && f.Pages == nil && f.Sections == nil {
		return nil
	}
	var allowed []bool
	if docs != nil {
		allowed = make([]bool, len(vs.docIDs))
		for _, d := range docs {
			if i, ok := vs.docIdx[d]; ok {
				allowed[i] = true
			}
		}
	}
	return func(i int) bool {
		return (allowed == nil || allowed[vs.docs[i]]) && f.MatchChunk(int(vs.pages[i]), vs.headings[i])
	}
}

// search returns the ids of the n chunks whose vectors have the greatest dot
// product with q (a unit vector of vs.dim), among those keep accepts (nil:
// all), best first; ties go to the older chunk (lower row_seq), as in SQL.
func (vs *vectorSet) search(q []float32, n int, keep func(i int) bool) []string {
	if len(q) != vs.dim {
		return nil
	}
	d := vs.dim
	idx := retrieval.NearestVectors(q, len(vs.ids), n,
		func(i int) []float32 { return vs.data[i*d : (i+1)*d] },
		func(i int) int64 { return vs.rowSeqs[i] },
		keep)
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = vs.ids[j]
	}
	return out
}
