package retrieval

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"sync"
)

// convIndex is the in-memory search index of one conversation, built from
// the chunks table: per chunk its row id, document, page and heading (for
// filters), plus the BM25 index and the vectors. Chunk numbers are positions
// in these slices. Adding a document appends to it; deleting one drops the
// whole convIndex, to be rebuilt by the next search.
type convIndex struct {
	mu       sync.RWMutex
	rowids   []int64
	docs     []int32 // index into docIDs
	pages    []int32
	headings []string
	docIDs   []string
	docIdx   map[string]int32
	text     *textIndex
	vec      vectorIndex
	strBytes int64
}

func newConvIndex() *convIndex {
	return &convIndex{docIdx: map[string]int32{}, text: newTextIndex()}
}

// chunkRow is a stored chunk as the index needs it.
type chunkRow struct {
	rowid   int64
	docID   string
	name    string
	page    int
	heading string
	text    string
	vector  []float32 // normalised; nil for none
}

// add appends a chunk; the caller holds mu for writing.
func (ci *convIndex) add(r chunkRow) {
	d, ok := ci.docIdx[r.docID]
	if !ok {
		d = int32(len(ci.docIDs))
		ci.docIDs = append(ci.docIDs, r.docID)
		ci.docIdx[r.docID] = d
		ci.strBytes += int64(len(r.docID)) + 64
	}
	// Chunks of a section share their heading: keep one copy.
	if n := len(ci.headings); n > 0 && ci.headings[n-1] == r.heading {
		r.heading = ci.headings[n-1]
	} else {
		ci.strBytes += int64(len(r.heading))
	}
	c := uint32(len(ci.rowids))
	ci.rowids = append(ci.rowids, r.rowid)
	ci.docs = append(ci.docs, d)
	ci.pages = append(ci.pages, int32(min(r.page, math.MaxInt32)))
	ci.headings = append(ci.headings, r.heading)
	ci.text.add(c, r.text, r.heading, r.name)
	ci.vec.add(r.vector)
}

// bytes estimates the memory the index holds.
func (ci *convIndex) bytes() int64 {
	return int64(len(ci.rowids))*(8+4+4+16) + ci.strBytes + ci.text.bytes() + ci.vec.bytes()
}

// loadConvIndex builds a conversation's index from the database.
func loadConvIndex(ctx context.Context, db *sql.DB, conversationID string) (*convIndex, error) {
	rows, err := db.QueryContext(ctx, `SELECT c.rowid, c.document_id, d.name, c.page, c.heading, c.text, c.vector
		FROM chunks c JOIN documents d ON d.conversation_id = c.conversation_id AND d.id = c.document_id
		WHERE c.conversation_id = ? ORDER BY c.rowid`, conversationID)
	if err != nil {
		return nil, fmt.Errorf("load index of conversation: %w", err)
	}
	defer rows.Close()
	ci := newConvIndex()
	var names = map[string]string{}
	for rows.Next() {
		var (
			r    chunkRow
			blob []byte
		)
		if err := rows.Scan(&r.rowid, &r.docID, &r.name, &r.page, &r.heading, &r.text, &blob); err != nil {
			return nil, fmt.Errorf("load index of conversation: %w", err)
		}
		if n, ok := names[r.docID]; ok {
			r.name = n
		} else {
			names[r.docID] = r.name
		}
		if len(blob) >= 4 {
			r.vector = decodeVector(blob)
		}
		ci.add(r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load index of conversation: %w", err)
	}
	return ci, nil
}

// indexCache keeps the indexes of recently searched conversations within a
// memory budget, dropping the least recently used first. A conversation
// whose index alone is over the budget is built for each search and not
// kept.
type indexCache struct {
	mu      sync.Mutex
	budget  int64
	used    int64
	tick    uint64
	entries map[string]*cacheEntry
	gen     map[string]uint64 // bumped by every write to a conversation
	loading map[string]*loadCall
}

type cacheEntry struct {
	ci       *convIndex
	bytes    int64
	lastUsed uint64
}

type loadCall struct {
	done chan struct{}
	ci   *convIndex
	err  error
}

func newIndexCache(budget int64) *indexCache {
	return &indexCache{budget: budget, entries: map[string]*cacheEntry{}, gen: map[string]uint64{}, loading: map[string]*loadCall{}}
}

// invalidate drops the conversation's index after a write that the index
// cannot follow (a deletion or a replaced document).
func (c *indexCache) invalidate(conversationID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen[conversationID]++
	if e, ok := c.entries[conversationID]; ok {
		c.used -= e.bytes
		delete(c.entries, conversationID)
	}
}

// appendRows adds a newly stored document's chunks to the conversation's
// index if it is cached, unless the index already has that document (it was
// loaded after the rows were committed). A load in progress is told to
// discard its result, which may predate the rows.
func (c *indexCache) appendRows(conversationID string, rows []chunkRow) {
	c.mu.Lock()
	c.gen[conversationID]++
	e := c.entries[conversationID]
	c.mu.Unlock()
	if e == nil || len(rows) == 0 {
		return
	}
	e.ci.mu.Lock()
	if _, has := e.ci.docIdx[rows[0].docID]; !has {
		for _, r := range rows {
			e.ci.add(r)
		}
	}
	e.ci.mu.Unlock()

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[conversationID] != e {
		return // invalidated meanwhile
	}
	e.ci.mu.RLock()
	b := e.ci.bytes()
	e.ci.mu.RUnlock()
	c.used += b - e.bytes
	e.bytes = b
	c.tick++
	e.lastUsed = c.tick
	for c.used > c.budget && len(c.entries) > 1 {
		c.evictLocked(conversationID)
	}
}

// get returns the conversation's index, loading it once for concurrent
// callers.
func (c *indexCache) get(ctx context.Context, db *sql.DB, conversationID string) (*convIndex, error) {
	c.mu.Lock()
	c.tick++
	if e, ok := c.entries[conversationID]; ok {
		e.lastUsed = c.tick
		c.mu.Unlock()
		return e.ci, nil
	}
	if l, ok := c.loading[conversationID]; ok {
		c.mu.Unlock()
		select {
		case <-l.done:
			return l.ci, l.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	l := &loadCall{done: make(chan struct{})}
	c.loading[conversationID] = l
	gen := c.gen[conversationID]
	c.mu.Unlock()

	// Load without the caller's cancellation, so that one impatient caller
	// does not fail the others waiting for the same load.
	l.ci, l.err = loadConvIndex(context.WithoutCancel(ctx), db, conversationID)

	c.mu.Lock()
	delete(c.loading, conversationID)
	if l.err == nil && c.gen[conversationID] == gen {
		b := l.ci.bytes()
		if b <= c.budget {
			for c.used+b > c.budget && len(c.entries) > 0 {
				c.evictLocked("")
			}
			c.tick++
			c.entries[conversationID] = &cacheEntry{ci: l.ci, bytes: b, lastUsed: c.tick}
			c.used += b
		}
	}
	c.mu.Unlock()
	close(l.done)
	return l.ci, l.err
}

// evictLocked drops the least recently used entry other than keep.
func (c *indexCache) evictLocked(keep string) {
	var oldest string
	var least uint64 = math.MaxUint64
	for id, e := range c.entries {
		if id != keep && e.lastUsed < least {
			oldest, least = id, e.lastUsed
		}
	}
	if e, ok := c.entries[oldest]; ok {
		c.used -= e.bytes
		delete(c.entries, oldest)
	}
}
