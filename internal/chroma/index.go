package chroma

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"datachat"
	"datachat/internal/retrieval"
)

// Metadata keys of a record besides the reserved ones of [retrieval]: the
// document's own key k is stored as metaPrefix+k.
const (
	metaPrefix = "meta."
	// collectionConvKey names the conversation in a collection's metadata.
	collectionConvKey = "datachat_conversation_id"
)

// batchBytes caps the estimated JSON size of one add request.
const batchBytes = 16 << 20

// CollectionName returns the name of a conversation's collection:
// "datachat-<id>" when that is a valid Chroma name, else
// "datachat_<sha256 of the id in hex>" (the two forms cannot collide).
func CollectionName(conversationID string) string {
	name := "datachat-" + conversationID
	if validName(name) {
		return name
	}
	sum := sha256.Sum256([]byte(conversationID))
	return "datachat_" + hex.EncodeToString(sum[:])
}

// validName reports whether s is a collection name Chroma accepts: 3–512
// characters of [a-zA-Z0-9._-], starting and ending with a letter or digit
// (and, for older servers, no "..").
func validName(s string) bool {
	if len(s) < 3 || len(s) > 512 || strings.Contains(s, "..") {
		return false
	}
	alnum := func(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' }
	for i := 0; i < len(s); i++ {
		if b := s[i]; !alnum(b) && b != '.' && b != '_' && b != '-' {
			return false
		}
	}
	return alnum(s[0]) && alnum(s[len(s)-1])
}

// collectionInfo is the part of Chroma's collection object used here.
type collectionInfo struct {
	ID            string         `json:"id"`
	Name          string         `json:"name"`
	Metadata      map[string]any `json:"metadata"`
	Configuration struct {
		HNSW  *struct{ Space string } `json:"hnsw"`
		SPANN *struct{ Space string } `json:"spann"`
	} `json:"configuration_json"`
}

func (ci *collectionInfo) space() string {
	switch {
	case ci.Configuration.HNSW != nil:
		return ci.Configuration.HNSW.Space
	case ci.Configuration.SPANN != nil:
		return ci.Configuration.SPANN.Space
	}
	if s, ok := ci.Metadata["hnsw:space"].(string); ok {
		return s
	}
	return "l2"
}

// collection returns the id of the conversation's collection, creating it
// when create is set; "" when it does not exist and create is not set.
func (c *Client) collection(ctx context.Context, conversationID string, create bool) (string, error) {
	name := CollectionName(conversationID)
	c.mu.Lock()
	id, ok := c.collections[name]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	var ci collectionInfo
	var err error
	if create {
		err = c.do(ctx, http.MethodPost, c.dbPath+"/collections", map[string]any{
			"name":          name,
			"configuration": map[string]any{"hnsw": map[string]any{"space": "cosine"}},
			"metadata":      map[string]any{collectionConvKey: conversationID},
			"get_or_create": true,
		}, &ci)
	} else {
		err = c.do(ctx, http.MethodGet, c.dbPath+"/collections/"+url.PathEscape(name), nil, &ci)
		if isNotFound(err) {
			return "", nil
		}
	}
	if err != nil {
		return "", fmt.Errorf("collection %s: %w", name, err)
	}
	if ci.ID == "" {
		return "", fmt.Errorf("chroma: collection %s: the answer has no id", name)
	}
	if sp := ci.space(); sp != "cosine" {
		return "", fmt.Errorf("chroma: collection %s measures %q distance, want cosine: it was not made by datachat; delete it or use another Chroma database", name, sp)
	}
	c.mu.Lock()
	c.collections[name] = ci.ID
	c.mu.Unlock()
	return ci.ID, nil
}

func (c *Client) forget(conversationID string) {
	c.mu.Lock()
	delete(c.collections, CollectionName(conversationID))
	c.mu.Unlock()
}

// withCollection runs fn with the conversation's collection id. When the
// collection turns out to be gone (deleted by another process since it was
// looked up), it looks it up again and retries once. With create unset and
// no collection, fn is not run and the result is (false, nil).
func (c *Client) withCollection(ctx context.Context, conversationID string, create bool, fn func(id string) error) (bool, error) {
	for attempt := 0; ; attempt++ {
		id, err := c.collection(ctx, conversationID, create)
		if err != nil || id == "" {
			return false, err
		}
		err = fn(id)
		if attempt == 0 && isNotFound(err) {
			c.forget(conversationID)
			continue
		}
		return true, err
	}
}

func (c *Client) recordsPath(id, op string) string {
	return c.dbPath + "/collections/" + url.PathEscape(id) + "/" + op
}

// Add indexes the chunks of doc in the conversation, replacing any chunks
// the document had. It embeds them all first, then upserts them in batches
// of at most the server's max_batch_size. If anything fails, it removes what
// it stored of the document, so nothing of it is searchable.
//
// Errors: EINVALID for a document without an id or name; the embedder's
// error (wrapped) when embedding fails; EBUSY when Chroma cannot be reached;
// others are internal, with Chroma's message.
func (c *Client) Add(ctx context.Context, conversationID string, doc *datachat.Document, chunks []*datachat.Chunk) error {
	if err := retrieval.CheckDocument(conversationID, doc); err != nil {
		return err
	}
	var vecs [][]float32
	if len(chunks) > 0 {
		var err error
		if vecs, err = retrieval.EmbedChunks(ctx, c.embedder, chunks); err != nil {
			c.cleanup(ctx, conversationID, doc.ID)
			return fmt.Errorf("embed chunks of %q: %w", doc.Name, err)
		}
	}
	if err := c.add(ctx, conversationID, doc, chunks, vecs); err != nil {
		c.cleanup(ctx, conversationID, doc.ID)
		return fmt.Errorf("index document %q in Chroma: %w", doc.Name, err)
	}
	return nil
}

func (c *Client) add(ctx context.Context, conversationID string, doc *datachat.Document, chunks []*datachat.Chunk, vecs [][]float32) error {
	if err := c.DeleteDocument(ctx, conversationID, doc.ID); err != nil {
		return err
	}
	if len(chunks) == 0 {
		return nil
	}
	limit, err := c.maxBatchSize(ctx)
	if err != nil {
		return err
	}
	docMeta := map[string]any{}
	metaBytes := 0
	for k, v := range doc.Metadata {
		if !retrieval.ReservedKey(k) {
			docMeta[metaPrefix+k] = v
			metaBytes += len(k) + len(v) + 16
		}
	}
	type batch struct {
		IDs        []string         `json:"ids"`
		Embeddings [][]float32      `json:"embeddings"`
		Documents  []string         `json:"documents"`
		Metadatas  []map[string]any `json:"metadatas"`
	}
	// The first batch finds (or makes) the collection; if it vanishes later,
	// the conversation was deleted meanwhile and the add fails.
	collID := ""
	send := func(b *batch) error {
		if collID != "" {
			return c.do(ctx, http.MethodPost, c.recordsPath(collID, "upsert"), b, nil)
		}
		_, err := c.withCollection(ctx, conversationID, true, func(id string) error {
			collID = id
			return c.do(ctx, http.MethodPost, c.recordsPath(id, "upsert"), b, nil)
		})
		return err
	}
	b := &batch{}
	size := 0
	for i, ch := range chunks {
		md := make(map[string]any, 5+len(docMeta))
		for k, v := range docMeta {
			md[k] = v
		}
		md[retrieval.MetaDocument] = doc.Name
		md[retrieval.MetaDocumentID] = doc.ID
		md[retrieval.MetaPage] = max(ch.Page, 0)
		md[retrieval.MetaSection] = ch.Heading
		md[retrieval.MetaChunk] = ch.Seq
		id := retrieval.ChunkID(doc.ID, ch)
		// A rough JSON size: ~12 bytes a float, plus texts and metadata.
		rec := 12*len(vecs[i]) + len(ch.Text) + len(ch.Heading) + len(id) + len(doc.Name) + len(doc.ID) + metaBytes + 160
		if len(b.IDs) > 0 && (len(b.IDs) >= limit || size+rec > batchBytes) {
			if err := send(b); err != nil {
				return err
			}
			b, size = &batch{}, 0
		}
		b.IDs = append(b.IDs, id)
		b.Embeddings = append(b.Embeddings, vecs[i])
		b.Documents = append(b.Documents, ch.Text)
		b.Metadatas = append(b.Metadatas, md)
		size += rec
	}
	return send(b)
}

// cleanup removes what an Add that failed may have stored of a document,
// even when ctx has ended; a failure is logged.
func (c *Client) cleanup(ctx context.Context, conversationID, documentID string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
	defer cancel()
	if err := c.DeleteDocument(cctx, conversationID, documentID); err != nil {
		c.log.WarnContext(ctx, "chroma: removing a document after a failed add failed; its chunks may stay searchable until it is deleted",
			slog.String("conversation_id", conversationID), slog.String("document_id", documentID), slog.Any("error", err))
	}
}

// DeleteDocument removes a document's chunks. Deleting a document that is
// not indexed is not an error.
//
// Errors: EBUSY when Chroma cannot be reached; others are internal.
func (c *Client) DeleteDocument(ctx context.Context, conversationID, documentID string) error {
	_, err := c.withCollection(ctx, conversationID, false, func(id string) error {
		err := c.do(ctx, http.MethodPost, c.recordsPath(id, "delete"),
			map[string]any{"where": map[string]any{retrieval.MetaDocumentID: map[string]any{"$eq": documentID}}}, nil)
		return err
	})
	if isNotFound(err) {
		c.forget(conversationID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete document %s from Chroma: %w", documentID, err)
	}
	return nil
}

// Documents returns the ids of the conversation's indexed documents (those
// with a first chunk).
//
// Errors: EBUSY when Chroma cannot be reached; others are internal.
func (c *Client) Documents(ctx context.Context, conversationID string) ([]string, error) {
	ids := []string{}
	_, err := c.withCollection(ctx, conversationID, false, func(id string) error {
		var out struct {
			Metadatas []map[string]any `json:"metadatas"`
		}
		err := c.do(ctx, http.MethodPost, c.recordsPath(id, "get"), map[string]any{
			"where":   map[string]any{retrieval.MetaChunk: map[string]any{"$eq": 0}},
			"include": []string{"metadatas"},
		}, &out)
		if err != nil {
			return err
		}
		for _, md := range out.Metadatas {
			if d, ok := md[retrieval.MetaDocumentID].(string); ok && !slices.Contains(ids, d) {
				ids = append(ids, d)
			}
		}
		return nil
	})
	if isNotFound(err) {
		c.forget(conversationID)
		return []string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list documents in Chroma: %w", err)
	}
	slices.Sort(ids)
	return ids, nil
}

// DeleteConversation drops the conversation's collection. Deleting a
// conversation without one is not an error.
//
// Errors: EBUSY when Chroma cannot be reached; others are internal.
func (c *Client) DeleteConversation(ctx context.Context, conversationID string) error {
	name := CollectionName(conversationID)
	c.forget(conversationID)
	err := c.do(ctx, http.MethodDelete, c.dbPath+"/collections/"+url.PathEscape(name), nil, nil)
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("delete conversation %s from Chroma: %w", conversationID, err)
	}
	return nil
}

// Query embeds q.Text and asks Chroma for the conversation's TopK nearest
// chunks that pass the filters, best first. Result.Embedding is the
// embedding's time, Result.Retrieval Chroma's round trip and the mapping;
// Result.Hybrid is true (vectors rank alone).
//
// Errors: EINVALID for an empty query, TopK above [retrieval.MaxTopK] or
// malformed filters; the embedder's error (wrapped); EBUSY when Chroma
// cannot be reached; others are internal, with Chroma's message.
func (c *Client) Query(ctx context.Context, q retrieval.Query) (*retrieval.Result, error) {
	topK, f, err := retrieval.Prepare(q)
	if err != nil {
		return nil, err
	}
	res := &retrieval.Result{Sources: []retrieval.Source{}, Hybrid: true}
	es := time.Now()
	out, err := c.embedder.Embed(ctx, []string{q.Text})
	res.Embedding = time.Since(es)
	switch {
	case err != nil:
		return nil, fmt.Errorf("embed the query: %w", err)
	case len(out) != 1 || len(out[0]) == 0:
		return nil, fmt.Errorf("embed the query: the embedder returned %d vectors", len(out))
	}
	qvec := retrieval.Normalize(out[0])

	rs := time.Now()
	defer func() { res.Retrieval = time.Since(rs) }()
	if f.Pages != nil && len(f.Pages) == 0 {
		return res, nil // no page filter value was a page number
	}
	body := map[string]any{
		"query_embeddings": [][]float32{qvec},
		"n_results":        topK,
		"include":          []string{"documents", "metadatas", "distances"},
	}
	if w := where(f); w != nil {
		body["where"] = w
	}
	var qr queryResponse
	found, err := c.withCollection(ctx, q.ConversationID, false, func(id string) error {
		return c.do(ctx, http.MethodPost, c.recordsPath(id, "query"), body, &qr)
	})
	switch {
	case isNotFound(err):
		c.forget(q.ConversationID)
		return res, nil
	case err != nil:
		return nil, fmt.Errorf("search Chroma: %w", err)
	case !found || len(qr.IDs) == 0:
		return res, nil
	}
	ids := qr.IDs[0]
	var docs []*string
	var metas []map[string]any
	var dists []*float64
	if len(qr.Documents) > 0 {
		docs = qr.Documents[0]
	}
	if len(qr.Metadatas) > 0 {
		metas = qr.Metadatas[0]
	}
	if len(qr.Distances) > 0 {
		dists = qr.Distances[0]
	}
	if len(docs) != len(ids) || len(metas) != len(ids) || len(dists) != len(ids) {
		return nil, fmt.Errorf("search Chroma: the answer has %d ids, %d documents, %d metadatas and %d distances",
			len(ids), len(docs), len(metas), len(dists))
	}
	for i, id := range ids {
		r := record(metas[i])
		if !f.MatchDocument(r.name, r.docID, r.meta) || !f.MatchChunk(r.page, r.section) {
			// Chroma applied the same filters; this is only a guard.
			c.log.WarnContext(ctx, "chroma: a result does not pass the query's filters; left out", slog.String("id", id))
			continue
		}
		s := retrieval.Source{
			ID:       id,
			Metadata: retrieval.SourceMetadata(r.name, r.docID, r.page, r.section, r.seq, r.meta),
		}
		if docs[i] != nil {
			s.Text = *docs[i]
		}
		if dists[i] != nil {
			d := *dists[i]
			s.Distance = &d
			s.Score = 1 - d
		}
		res.Sources = append(res.Sources, s)
	}
	return res, nil
}

type queryResponse struct {
	IDs       [][]string         `json:"ids"`
	Documents [][]*string        `json:"documents"`
	Metadatas [][]map[string]any `json:"metadatas"`
	Distances [][]*float64       `json:"distances"`
}

// stored is a record's metadata, read back.
type stored struct {
	name, docID, section string
	page, seq            int
	meta                 map[string]string
}

func record(md map[string]any) stored {
	r := stored{meta: map[string]string{}}
	str := func(v any) string {
		switch v := v.(type) {
		case string:
			return v
		case nil:
			return ""
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64)
		default:
			b, _ := json.Marshal(v)
			return string(b)
		}
	}
	num := func(v any) int {
		if f, ok := v.(float64); ok {
			return int(f)
		}
		return 0
	}
	for k, v := range md {
		switch k {
		case retrieval.MetaDocument:
			r.name = str(v)
		case retrieval.MetaDocumentID:
			r.docID = str(v)
		case retrieval.MetaSection:
			r.section = str(v)
		case retrieval.MetaPage:
			r.page = num(v)
		case retrieval.MetaChunk:
			r.seq = num(v)
		default:
			if uk, ok := strings.CutPrefix(k, metaPrefix); ok {
				r.meta[uk] = str(v)
			}
		}
	}
	return r
}

// where turns parsed filters into a Chroma where clause: each condition
// "key $in values", all ANDed; nil when there is none. Values stay data:
// strings (page numbers as ints) inside a list.
func where(f retrieval.Filters) map[string]any {
	var conds []map[string]any
	in := func(key string, vals any) {
		conds = append(conds, map[string]any{key: map[string]any{"$in": vals}})
	}
	if f.Documents != nil {
		in(retrieval.MetaDocument, f.Documents)
	}
	if f.DocumentIDs != nil {
		in(retrieval.MetaDocumentID, f.DocumentIDs)
	}
	if f.Pages != nil {
		in(retrieval.MetaPage, slices.Clone(f.Pages))
	}
	if f.Sections != nil {
		in(retrieval.MetaSection, f.Sections)
	}
	keys := make([]string, 0, len(f.Meta))
	for k := range f.Meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		in(metaPrefix+k, f.Meta[k])
	}
	switch len(conds) {
	case 0:
		return nil
	case 1:
		return conds[0]
	}
	return map[string]any{"$and": conds}
}
