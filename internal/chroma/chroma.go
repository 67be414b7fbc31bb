// Package chroma is the [retrieval.Backend] that keeps documents in a Chroma
// server (DATACHAT_RETRIEVAL=chroma, CHROMA_URL). It
// talks to Chroma's REST API v2 with net/http and encoding/json; the server
// tested is the one of npm chromadb 3.5.0 (server 1.0.0).
//
// Chroma stores vectors only: datachat embeds chunks and queries itself with
// the configured embedding model ([Options.Embedder], EMBEDDING_PROVIDER),
// and never lets the server embed. A query's text is only embedded; it never
// reaches Chroma, so it cannot be read as a filter or an operator. Filter
// values are sent as JSON strings (numbers for pages) inside $in lists.
//
// # Layout
//
// One collection per conversation, named "datachat-<conversation id>" (or
// "datachat_<sha256 of the id>" when the id is not a valid Chroma name),
// created on the first [Client.Add] with cosine distance. The conversation
// is the unit of every query and of deletion: a query searches only its own
// HNSW index, so no conversation filter can be forgotten, and an approximate
// search is never narrowed by a filter that most of a shared index fails;
// deleting a conversation drops its collection instead of scanning one huge
// collection by metadata. The cost is one collection per conversation that
// has documents, which Chroma handles as a matter of course.
//
// # Records
//
// One record per chunk: the id is [retrieval.ChunkID], the document the
// chunk's text, the embedding the unit vector of its text (with its heading
// path, as [retrieval.EmbedChunks] builds it). Its metadata holds the keys of
// [retrieval.SourceMetadata] — "document", "document_id", "page" (an int, 0
// for none), "section" (the heading path, "" for none) and "chunk" (an int)
// — and the document's own metadata under "meta.<key>", so no user key can
// clash with those or with Chroma's own; user keys that clash with the
// reserved ones are not stored, as [retrieval.SourceMetadata] leaves them out.
// Query results are mapped back with [retrieval.SourceMetadata], so sources
// are the embedded backend's, key for key.
//
// Score is 1 − the cosine distance (higher is better), Distance the cosine
// distance Chroma reports.
package chroma

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"datachat"
	"datachat/internal/retrieval"
)

// Options configure [New].
type Options struct {
	// URL is the Chroma server, CHROMA_URL, e.g. http://127.0.0.1:8000. A
	// user and password in it are sent as basic auth and never shown.
	URL string
	// Embedder embeds chunks and queries; required.
	Embedder retrieval.Embedder
	// Tenant and Database default to Chroma's "default_tenant" and
	// "default_database".
	Tenant, Database string
	// HTTPClient, if set, sends the requests; its own Timeout adds to
	// [Options.Timeout].
	HTTPClient *http.Client
	// Logger gets warnings (a failed clean-up); nil discards them.
	Logger *slog.Logger
	// Timeout bounds each request to Chroma; 0 means 30 s.
	Timeout time.Duration
	// MaxBatch caps the records of one add request; 0 means the server's
	// max_batch_size, and a larger value is lowered to it.
	MaxBatch int
}

// Client is a Chroma server used as a [retrieval.Backend]. It is safe for
// concurrent use.
type Client struct {
	base     *url.URL // ends in /api/v2
	shown    string   // the URL without credentials, for messages
	dbPath   string   // /tenants/{t}/databases/{d}
	tenant   string
	database string
	embedder retrieval.Embedder
	http     *http.Client
	ownHTTP  bool
	log      *slog.Logger
	timeout  time.Duration
	maxBatch int

	mu          sync.Mutex
	collections map[string]string // collection name → id
	serverBatch int               // max_batch_size, 0 until asked
}

var _ retrieval.Backend = (*Client)(nil)

// DefaultTimeout bounds a request when [Options.Timeout] is 0.
const DefaultTimeout = 30 * time.Second

// New returns a client of the Chroma server at opts.URL. It does not contact
// the server; [Client.Ping] does.
//
// Errors: a message naming CHROMA_URL for a malformed URL, and
// EMBEDDING_PROVIDER when opts.Embedder is nil.
func New(opts Options) (*Client, error) {
	if opts.Embedder == nil {
		return nil, errors.New("chroma: an embedding model is required: set EMBEDDING_PROVIDER (Chroma searches by vectors and datachat does not let it embed text)")
	}
	u, err := url.Parse(strings.TrimSpace(opts.URL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		shown := opts.URL
		if err == nil {
			shown = u.Redacted()
		} else {
			shown = "(unparsable)"
		}
		return nil, fmt.Errorf("chroma: CHROMA_URL %s: want http://host:port or https://host:port", shown)
	}
	shown := u.Redacted()
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/v2"
	u.RawPath = ""
	tenant, database := opts.Tenant, opts.Database
	if tenant == "" {
		tenant = "default_tenant"
	}
	if database == "" {
		database = "default_database"
	}
	c := &Client{
		base:        u,
		shown:       shown,
		dbPath:      "/tenants/" + url.PathEscape(tenant) + "/databases/" + url.PathEscape(database),
		tenant:      tenant,
		database:    database,
		embedder:    opts.Embedder,
		http:        opts.HTTPClient,
		log:         opts.Logger,
		timeout:     opts.Timeout,
		maxBatch:    opts.MaxBatch,
		collections: map[string]string{},
	}
	if c.http == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 32
		c.http = &http.Client{Transport: tr}
		c.ownHTTP = true
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	return c, nil
}

// Close releases idle connections of the client's own HTTP client.
func (c *Client) Close() error {
	if c.ownHTTP {
		c.http.CloseIdleConnections()
	}
	return nil
}

// Ping checks that the Chroma server answers (its heartbeat) and has the
// tenant's database, so that a server can refuse to start without them.
// (Chroma answers for a missing database as for a missing collection, which
// a search would take for a conversation without documents.)
//
// Errors: EBUSY, with the cause naming CHROMA_URL and the address, when the
// server cannot be reached; others for a missing database or an unexpected
// answer.
func (c *Client) Ping(ctx context.Context) error {
	var hb map[string]any
	if err := c.do(ctx, http.MethodGet, "/heartbeat", nil, &hb); err != nil {
		return err
	}
	var db map[string]any
	if err := c.do(ctx, http.MethodGet, c.dbPath, nil, &db); err != nil {
		if isNotFound(err) {
			return fmt.Errorf("chroma: the Chroma server at %s (CHROMA_URL) has no database %q in tenant %q: %w", c.shown, c.database, c.tenant, err)
		}
		return err
	}
	return nil
}

// maxBatchSize returns how many records one add request may carry: the
// server's max_batch_size (asked once), lowered to Options.MaxBatch.
func (c *Client) maxBatchSize(ctx context.Context) (int, error) {
	c.mu.Lock()
	n := c.serverBatch
	c.mu.Unlock()
	if n == 0 {
		var pf struct {
			MaxBatchSize int `json:"max_batch_size"`
		}
		if err := c.do(ctx, http.MethodGet, "/pre-flight-checks", nil, &pf); err != nil {
			return 0, err
		}
		n = pf.MaxBatchSize
		if n <= 0 {
			return 0, fmt.Errorf("chroma: pre-flight-checks answered max_batch_size %d", pf.MaxBatchSize)
		}
		c.mu.Lock()
		c.serverBatch = n
		c.mu.Unlock()
	}
	if c.maxBatch > 0 && c.maxBatch < n {
		n = c.maxBatch
	}
	return n, nil
}

// maxResponse caps the body read from Chroma.
const maxResponse = 64 << 20

// HTTPError is an error answer of the Chroma server.
type HTTPError struct {
	Method, Path string // Path is relative to /api/v2
	Status       int
	Kind         string // Chroma's "error", e.g. InvalidArgumentError
	Message      string // Chroma's "message", or the start of the body
}

func (e *HTTPError) Error() string {
	kind := e.Kind
	if kind == "" {
		kind = http.StatusText(e.Status)
	}
	return fmt.Sprintf("chroma: %s %s: %d %s: %s", e.Method, e.Path, e.Status, kind, e.Message)
}

func isNotFound(err error) bool {
	var he *HTTPError
	return errors.As(err, &he) && he.Status == http.StatusNotFound
}

// do sends one request to path (under /api/v2) with in as its JSON body and
// decodes the answer into out (nil: discarded), within c.timeout.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("chroma: %s %s: encode request: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	u := *c.base
	u.Path += path
	req, err := http.NewRequestWithContext(rctx, method, u.String(), body)
	if err != nil {
		return fmt.Errorf("chroma: %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.transportError(ctx, method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		he := &HTTPError{Method: method, Path: path, Status: resp.StatusCode}
		var eb struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		if json.Unmarshal(raw, &eb) == nil && (eb.Error != "" || eb.Message != "") {
			he.Kind, he.Message = eb.Error, eb.Message
		} else {
			he.Message = strings.TrimSpace(string(raw[:min(len(raw), 512)]))
		}
		return he
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponse)).Decode(out); err != nil {
		if ctx.Err() == nil && rctx.Err() != nil {
			return c.transportError(ctx, method, path, rctx.Err())
		}
		return fmt.Errorf("chroma: %s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// errUnavailable is what a user is told when Chroma does not answer.
const errUnavailable = "Document search is unavailable: the Chroma server does not answer. Try again in a moment."

// transportError explains a request that got no answer: the caller's
// context ended (its error, wrapped), the request's own timeout passed, or
// the server could not be reached.
func (c *Client) transportError(ctx context.Context, method, path string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("chroma: %s %s: %w", method, path, context.Cause(ctx))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return datachat.WrapError(datachat.EBUSY, errUnavailable,
			fmt.Errorf("chroma: %s %s: no answer from the Chroma server at %s (CHROMA_URL) within %s", method, path, c.shown, c.timeout))
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its URL is already named below, without credentials
	}
	return datachat.WrapError(datachat.EBUSY, errUnavailable,
		fmt.Errorf("chroma: cannot reach the Chroma server at %s (CHROMA_URL): %w", c.shown, err))
}
