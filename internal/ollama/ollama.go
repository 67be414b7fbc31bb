// Package ollama is the chat model and embedder for Ollama's native API:
// /api/chat streamed as NDJSON with tools, and /api/embed. The conversions
// between datachat's model types and the wire format are pure functions;
// internal/llm does the calling.
package ollama

import (
	"cmp"
	"context"
	"io"
	"net"
	"net/url"
	"strings"

	"datachat"
	"datachat/internal/llm"
)

// Defaults.
const (
	DefaultHost           = "http://127.0.0.1:11434"
	DefaultModel          = llm.OllamaModel
	DefaultEmbeddingModel = llm.OllamaEmbeddingModel
	defaultPort           = "11434"
	maxEmbedBatch         = 256
)

var provider = llm.Provider{Name: "ollama", URLVar: "OLLAMA_HOST", KeyHeader: "Authorization", KeyPrefix: "Bearer "}

// Options configure a [Client]. Zero values take the defaults; the Transport's
// are the llm package's.
type Options struct {
	Host           string // OLLAMA_HOST: "host", "host:port" or a URL
	Model          string // CHAT_MODEL
	EmbeddingModel string // EMBEDDING_MODEL
	NumCtx         int    // OLLAMA_NUM_CTX; 0 keeps the model's own
	APIKey         string // for Ollama Cloud or an authenticating proxy; optional
	llm.Transport
}

// Client is an Ollama chat model ([Client.Stream]) and embedder
// ([Client.Embed]). It is safe for concurrent use.
type Client struct {
	llm.Names
	opts Options
	base string
	llm  *llm.Client
}

// New returns a Client for opts.
func New(opts Options) *Client {
	opts.Model = cmp.Or(opts.Model, DefaultModel)
	opts.EmbeddingModel = cmp.Or(opts.EmbeddingModel, DefaultEmbeddingModel)
	return &Client{
		Names: llm.Names{Provider: provider.Name, Model: opts.Model, EmbeddingModel: opts.EmbeddingModel},
		opts:  opts,
		base:  HostURL(opts.Host),
		llm: llm.NewClient(llm.Config{
			Provider:          provider,
			Transport:         opts.Transport,
			Secrets:           []string{opts.APIKey},
			ErrorFromResponse: mapError,
		}),
	}
}

// HostURL turns an OLLAMA_HOST value into a base URL, as the ollama command
// does: scheme http and port 11434 unless given; an empty host is
// 127.0.0.1, and so is 0.0.0.0 (a listen address).
func HostURL(host string) string {
	host = strings.TrimSpace(host)
	if host == "" {
		return DefaultHost
	}
	scheme := "http"
	if s, rest, ok := strings.Cut(host, "://"); ok {
		scheme, host = s, rest
	}
	host, path, _ := strings.Cut(host, "/")
	port := defaultPort
	if scheme == "https" {
		port = "443"
	}
	if h, p, err := net.SplitHostPort(host); err == nil {
		host, port = h, p
	}
	if host == "" || host == "0.0.0.0" {
		host = "127.0.0.1"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, port), Path: strings.TrimRight("/"+path, "/")}
	return u.String()
}

// Host returns the base URL requests go to.
func (c *Client) Host() string { return c.base }

// Stream sends req to /api/chat and calls emit for each text delta and tool
// call, then the finish reason and one Usage event (prompt_eval_count,
// eval_count). A stream that ends without its done:true line is an error
// (connection kind). Errors are *datachat.ProviderError (context_too_large for
// errors about the context length), an error from emit, or one wrapping
// ctx.Err().
func (c *Client) Stream(ctx context.Context, req *datachat.ModelRequest, emit func(datachat.ModelEvent) error) error {
	model := cmp.Or(req.Model, c.opts.Model)
	wire, err := toRequest(req, model, c.opts.NumCtx)
	if err != nil {
		return llm.RequestError(provider, err)
	}
	h := provider.Header(c.opts.APIKey)
	h.Set("Accept", "application/x-ndjson")
	r := llm.ChatRequest(c.base+"/api/chat", h, model, req)
	return c.llm.StreamJSON(ctx, r, wire, emit, llm.WithCallIDs(decodeStream))
}

// decodeStream reads an NDJSON answer into out.
func decodeStream(body io.Reader, out *llm.Output, newID func() string) error {
	return llm.DecodeFrames(llm.NewNDJSONReader(body).Next, out, &decoder{newID: newID})
}

// Embed returns one vector per text from /api/embed, in order.
func (c *Client) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	model := c.opts.EmbeddingModel
	return llm.Embed(ctx, c.llm, texts, maxEmbedBatch, func(batch []string) (llm.Request, any) {
		r := llm.Request{URL: c.base + "/api/embed", Header: provider.Header(c.opts.APIKey), Model: model, Messages: len(batch)}
		return r, embedRequest{Model: model, Input: batch}
	}, func(resp *embedResponse) [][]float32 { return resp.Embeddings })
}
