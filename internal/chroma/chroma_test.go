package chroma_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"datachat"
	"datachat/internal/chroma"
	"datachat/internal/chroma/chromatest"
	"datachat/internal/retrieval"
	"datachat/internal/retrieval/backendtest"
	"datachat/internal/retrieval/retrievaltest"
	"datachat/internal/testnet"
)

// One Chroma server for the package's tests, started by the first test that
// needs it and stopped by TestMain; tests keep apart by conversation id.
var shared struct {
	once sync.Once
	srv  *chromatest.Server
	err  error
}

func serverURL(tb testing.TB) string {
	tb.Helper()
	chromatest.Require(tb)
	shared.once.Do(func() { shared.srv, shared.err = chromatest.StartServer(context.Background()) })
	if shared.err != nil {
		tb.Fatal(shared.err)
	}
	return shared.srv.URL
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.srv != nil {
		shared.srv.Close()
	}
	os.Exit(code)
}

func newClient(tb testing.TB, opts chroma.Options) *chroma.Client {
	tb.Helper()
	if opts.URL == "" {
		opts.URL = serverURL(tb)
	}
	if opts.Embedder == nil {
		opts.Embedder = &retrievaltest.HashEmbedder{Dim: 64}
	}
	c, err := chroma.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// convID returns a conversation id unique to this run.
func convID(name string) string { return fmt.Sprintf("%s-%d", name, time.Now().UnixNano()) }

func TestConformance(t *testing.T) {
	url := serverURL(t)
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T, emb retrieval.Embedder) retrieval.Backend {
			return newClient(t, chroma.Options{URL: url, Embedder: emb})
		},
		VectorsOnly: true,
	})
}

func TestNew(t *testing.T) {
	emb := &retrievaltest.HashEmbedder{}
	if _, err := chroma.New(chroma.Options{URL: "http://127.0.0.1:8000"}); err == nil || !strings.Contains(err.Error(), "EMBEDDING_PROVIDER") {
		t.Errorf("no embedder: got %v, want an error naming EMBEDDING_PROVIDER", err)
	}
	for _, u := range []string{"", "127.0.0.1:8000", "ftp://x", "http://", "http://u:secret@h:1/?q=1", "http://u:secret@%zz"} {
		_, err := chroma.New(chroma.Options{URL: u, Embedder: emb})
		if err == nil || !strings.Contains(err.Error(), "CHROMA_URL") || strings.Contains(err.Error(), "secret") {
			t.Errorf("URL %q: got %v, want an error naming CHROMA_URL without the password", u, err)
		}
	}
}

func TestPing(t *testing.T) {
	c := newClient(t, chroma.Options{})
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	c = newClient(t, chroma.Options{Database: "nodb"})
	if err := c.Ping(context.Background()); err == nil || !strings.Contains(err.Error(), `no database "nodb" in tenant "default_tenant"`) {
		t.Errorf("missing database: got %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	addr := testnet.ClosedAddr(t)
	c := newClient(t, chroma.Options{URL: "http://admin:s3cret@" + addr, Timeout: 5 * time.Second})
	ctx := context.Background()
	doc, chunks := backendtest.TextDoc("d", nil, "text")
	for name, err := range map[string]error{
		"ping":   c.Ping(ctx),
		"add":    c.Add(ctx, "conv", doc, chunks),
		"delete": c.DeleteConversation(ctx, "conv"),
		"query":  func() error { _, err := c.Query(ctx, retrieval.Query{ConversationID: "conv", Text: "x"}); return err }(),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "CHROMA_URL") || !strings.Contains(msg, addr) || strings.Contains(msg, "s3cret") {
			t.Errorf("%s: error %q, want it to name CHROMA_URL and %s, and no password", name, msg, addr)
		}
		if got := datachat.ErrorCode(err); got != datachat.EBUSY {
			t.Errorf("%s: code %s, want %s", name, got, datachat.EBUSY)
		}
		if m := datachat.ErrorMessage(err); strings.Contains(m, addr) {
			t.Errorf("%s: the user-facing message %q shows the address", name, m)
		}
	}
}

// TestTimeout: a server that accepts connections and never answers.
func TestTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	c := newClient(t, chroma.Options{URL: "http://" + l.Addr().String(), Timeout: 300 * time.Millisecond})
	start := time.Now()
	err = c.Ping(context.Background())
	if err == nil || !strings.Contains(err.Error(), "within 300ms") || !strings.Contains(err.Error(), "CHROMA_URL") {
		t.Errorf("got %v, want a timeout naming CHROMA_URL", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %s", d)
	}
	// The caller's own deadline is reported as such.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := c.Ping(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("caller's deadline: got %v", err)
	}
}

// TestServerError: Chroma's own message reaches the caller.
func TestServerError(t *testing.T) {
	url := serverURL(t)
	conv := convID("dims")
	c64 := newClient(t, chroma.Options{URL: url, Embedder: &retrievaltest.HashEmbedder{Dim: 64}})
	c32 := newClient(t, chroma.Options{URL: url, Embedder: &retrievaltest.HashEmbedder{Dim: 32}})
	ctx := context.Background()
	doc, chunks := backendtest.TextDoc("a", nil, "Sixty-four dimensions.")
	if err := c64.Add(ctx, conv, doc, chunks); err != nil {
		t.Fatal(err)
	}
	_, err := c32.Query(ctx, retrieval.Query{ConversationID: conv, Text: "dimensions"})
	var he *chroma.HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusBadRequest || !strings.Contains(err.Error(), "dimension of 64, got 32") {
		t.Errorf("query with other dimensions: got %v, want Chroma's 400 naming the dimensions", err)
	}
	doc2, chunks2 := backendtest.TextDoc("b", nil, "Thirty-two dimensions.")
	if err := c32.Add(ctx, conv, doc2, chunks2); err == nil || !strings.Contains(err.Error(), "dimension of 64, got 32") {
		t.Errorf("add with other dimensions: got %v", err)
	}
	if n := countDocument(t, url, conv, "b"); n != 0 {
		t.Errorf("after a failed add, %d chunks of the document remain", n)
	}
}

// countingTransport counts the requests whose path ends in suffix and can
// call hook after each.
type countingTransport struct {
	suffix string
	n      atomic.Int64
	hook   func(n int64)
}

func (ct *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if strings.HasSuffix(req.URL.Path, ct.suffix) {
		n := ct.n.Add(1)
		if ct.hook != nil {
			ct.hook(n)
		}
	}
	return resp, err
}

func manyChunks(id string, n int) (*datachat.Document, []*datachat.Chunk) {
	paras := make([]string, n)
	for i := range paras {
		paras[i] = fmt.Sprintf("Paragraph %d talks about topic %d and item %d.", i, i%17, i%5)
	}
	return backendtest.TextDoc(id, map[string]string{"kind": "many"}, paras...)
}

func TestBatches(t *testing.T) {
	ct := &countingTransport{suffix: "/upsert"}
	c := newClient(t, chroma.Options{HTTPClient: &http.Client{Transport: ct}, MaxBatch: 7})
	conv := convID("batches")
	doc, chunks := manyChunks("many", 50)
	if err := c.Add(context.Background(), conv, doc, chunks); err != nil {
		t.Fatal(err)
	}
	if got := ct.n.Load(); got != 8 {
		t.Errorf("50 chunks in batches of 7: %d upserts, want 8", got)
	}
	if n := countDocument(t, serverURL(t), conv, "many"); n != 50 {
		t.Errorf("%d chunks stored, want 50", n)
	}
	res, err := c.Query(context.Background(), retrieval.Query{ConversationID: conv, Text: "Paragraph 42 talks about topic 8 and item 2.", TopK: 50, Filters: map[string]any{"kind": "many"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sources) != 50 || res.Sources[0].ID != "many:42" {
		t.Errorf("got %d sources, first %v", len(res.Sources), res.Sources[0].ID)
	}
	for i := 1; i < len(res.Sources); i++ {
		if res.Sources[i].Score > res.Sources[i-1].Score {
			t.Fatalf("sources not best first at %d", i)
		}
	}
}

// TestServerBatchSize adds a document with more chunks than the server's
// max_batch_size, which must be split with no option set.
func TestServerBatchSize(t *testing.T) {
	url := serverURL(t)
	var pf struct {
		MaxBatchSize int `json:"max_batch_size"`
	}
	getJSON(t, url+"/api/v2/pre-flight-checks", &pf)
	if pf.MaxBatchSize <= 0 || pf.MaxBatchSize > 20000 {
		t.Skipf("max_batch_size %d", pf.MaxBatchSize)
	}
	ct := &countingTransport{suffix: "/upsert"}
	c := newClient(t, chroma.Options{URL: url, HTTPClient: &http.Client{Transport: ct}, Embedder: &retrievaltest.HashEmbedder{Dim: 16}})
	conv := convID("serverbatch")
	n := pf.MaxBatchSize + 10
	doc, chunks := manyChunks("big", n)
	if err := c.Add(context.Background(), conv, doc, chunks); err != nil {
		t.Fatal(err)
	}
	if got := ct.n.Load(); got != 2 {
		t.Errorf("%d chunks with max_batch_size %d: %d upserts, want 2", n, pf.MaxBatchSize, got)
	}
	if got := countDocument(t, url, conv, "big"); got != n {
		t.Errorf("%d chunks stored, want %d", got, n)
	}
}

// TestFailedBatchRemovesDocument: the caller gives up after two batches
// went in; nothing of the document may stay searchable, including the
// chunks of its earlier version, and other documents stay.
func TestFailedBatchRemovesDocument(t *testing.T) {
	url := serverURL(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ct := &countingTransport{suffix: "/upsert"}
	c := newClient(t, chroma.Options{URL: url, HTTPClient: &http.Client{Transport: ct}, MaxBatch: 5})
	conv := convID("failedbatch")
	other, otherChunks := backendtest.TextDoc("other", nil, "Another document stays.")
	if err := c.Add(ctx, conv, other, otherChunks); err != nil {
		t.Fatal(err)
	}
	doc, chunks := manyChunks("doc", 12)
	if err := c.Add(ctx, conv, doc, chunks[:3]); err != nil { // an earlier version
		t.Fatal(err)
	}
	ct.n.Store(0)
	ct.hook = func(n int64) {
		if n == 2 {
			cancel()
		}
	}
	err := c.Add(ctx, conv, doc, chunks)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if n := countDocument(t, url, conv, "doc"); n != 0 {
		t.Errorf("%d chunks of the failed document remain", n)
	}
	if n := countDocument(t, url, conv, "other"); n != 1 {
		t.Errorf("the other document has %d chunks, want 1", n)
	}
}

// TestHostileFilters: operator-looking values and keys are data.
func TestHostileFilters(t *testing.T) {
	c := newClient(t, chroma.Options{})
	ctx := context.Background()
	conv := convID("hostile")
	add := func(id string, meta map[string]string) {
		doc, chunks := backendtest.TextDoc(id, meta, "Shared words in every document.")
		if err := c.Add(ctx, conv, doc, chunks); err != nil {
			t.Fatal(err)
		}
	}
	add("ne", map[string]string{"tag": `{"$ne": ""}`, "$and": "x", "#document": "y", "meta.tag": "z"})
	add("plain", map[string]string{"tag": "x"})
	add("none", nil)
	for _, tc := range []struct {
		filters map[string]any
		want    []string
	}{
		{map[string]any{"tag": `{"$ne": ""}`}, []string{"ne:0"}},
		{map[string]any{"tag": "$ne"}, []string{}},
		{map[string]any{"tag": []any{`{"$ne": ""}`, "x"}}, []string{"ne:0", "plain:0"}},
		{map[string]any{"document": `{"$ne": ""}`}, []string{}},
		{map[string]any{"document_id": `{"$in": ["plain"]}`}, []string{}},
		{map[string]any{"$and": "x"}, []string{"ne:0"}},
		{map[string]any{"$or": "x"}, []string{}},
		{map[string]any{"#document": "y"}, []string{"ne:0"}},
		{map[string]any{"meta.tag": "z"}, []string{"ne:0"}},
		{map[string]any{"section": ""}, []string{"ne:0", "none:0", "plain:0"}},
		{map[string]any{"page": []any{"1", "-1", "0"}}, []string{"ne:0", "none:0", "plain:0"}},
	} {
		res, err := c.Query(ctx, retrieval.Query{ConversationID: conv, Text: "shared words", TopK: 10, Filters: tc.filters})
		if err != nil {
			t.Errorf("filters %v: %v", tc.filters, err)
			continue
		}
		got := []string{}
		for _, s := range res.Sources {
			got = append(got, s.ID)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("filters %v: got %v, want %v", tc.filters, got, tc.want)
		}
	}
	// The stored metadata comes back as the document's, not the collisions.
	res, err := c.Query(ctx, retrieval.Query{ConversationID: conv, Text: "shared", TopK: 1, Filters: map[string]any{"document_id": "ne"}})
	if err != nil || len(res.Sources) != 1 {
		t.Fatalf("%v %v", res, err)
	}
	md := res.Sources[0].Metadata
	if md["tag"] != `{"$ne": ""}` || md["$and"] != "x" || md["#document"] != "y" || md["meta.tag"] != "z" || md["document"] != "ne.txt" {
		t.Errorf("metadata = %v", md)
	}
}

// TestDeletedElsewhere: a collection dropped by another process (here,
// another client) is recreated by the next add, not reported missing.
func TestDeletedElsewhere(t *testing.T) {
	url := serverURL(t)
	a := newClient(t, chroma.Options{URL: url})
	b := newClient(t, chroma.Options{URL: url})
	ctx := context.Background()
	conv := convID("elsewhere")
	d1, c1 := backendtest.TextDoc("one", nil, "First text.")
	if err := a.Add(ctx, conv, d1, c1); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteConversation(ctx, conv); err != nil {
		t.Fatal(err)
	}
	if res, err := a.Query(ctx, retrieval.Query{ConversationID: conv, Text: "first"}); err != nil || len(res.Sources) != 0 {
		t.Fatalf("query after the collection was dropped elsewhere: %v, %v", res, err)
	}
	if err := a.DeleteDocument(ctx, conv, "one"); err != nil {
		t.Fatal(err)
	}
	d2, c2 := backendtest.TextDoc("two", nil, "Second text.")
	if err := a.Add(ctx, conv, d2, c2); err != nil {
		t.Fatal(err)
	}
	// b never saw a's new collection: it looks it up.
	res, err := b.Query(ctx, retrieval.Query{ConversationID: conv, Text: "second text"})
	if err != nil || len(res.Sources) != 1 || res.Sources[0].ID != "two:0" {
		t.Fatalf("got %v, %v", res, err)
	}
	if res.Embedding <= 0 || res.Retrieval <= 0 {
		t.Errorf("timings %v %v", res.Embedding, res.Retrieval)
	}
	if d := *res.Sources[0].Distance; res.Sources[0].Score != 1-d {
		t.Errorf("score %v, distance %v", res.Sources[0].Score, d)
	}
}

// TestForeignCollection: a collection of the same name that does not use
// cosine distance is refused, not silently used.
func TestForeignCollection(t *testing.T) {
	url := serverURL(t)
	conv := convID("foreign")
	postJSON(t, url+"/api/v2/tenants/default_tenant/databases/default_database/collections",
		map[string]any{"name": chroma.CollectionName(conv)}, nil)
	c := newClient(t, chroma.Options{URL: url})
	doc, chunks := backendtest.TextDoc("d", nil, "text")
	if err := c.Add(context.Background(), conv, doc, chunks); err == nil || !strings.Contains(err.Error(), "cosine") {
		t.Errorf("got %v, want an error about cosine distance", err)
	}
}

func TestEmptyDocument(t *testing.T) {
	c := newClient(t, chroma.Options{})
	ctx := context.Background()
	conv := convID("empty")
	doc, chunks := backendtest.TextDoc("d", nil, "Some words.")
	if err := c.Add(ctx, conv, doc, chunks); err != nil {
		t.Fatal(err)
	}
	if err := c.Add(ctx, conv, doc, nil); err != nil { // replaced by nothing
		t.Fatal(err)
	}
	if res, err := c.Query(ctx, retrieval.Query{ConversationID: conv, Text: "words"}); err != nil || len(res.Sources) != 0 {
		t.Errorf("got %v, %v", res, err)
	}
}

// countDocument counts the stored chunks of a document, asking Chroma.
func countDocument(t *testing.T, base, conv, docID string) int {
	t.Helper()
	db := base + "/api/v2/tenants/default_tenant/databases/default_database/collections/"
	var ci struct {
		ID string `json:"id"`
	}
	resp, err := http.Get(db + url.PathEscape(chroma.CollectionName(conv)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return 0
	}
	if err := json.NewDecoder(resp.Body).Decode(&ci); err != nil {
		t.Fatal(err)
	}
	var got struct {
		IDs []string `json:"ids"`
	}
	postJSON(t, db+ci.ID+"/get", map[string]any{"where": map[string]any{"document_id": docID}, "include": []string{}}, &got)
	return len(got.IDs)
}

func getJSON(t *testing.T, u string, out any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}

func postJSON(t *testing.T, u string, in, out any) {
	t.Helper()
	b, _ := json.Marshal(in)
	resp, err := http.Post(u, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode > 299 {
		t.Fatalf("POST %s: %d %s", u, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatal(err)
		}
	}
}
