// Package gemini is the chat model and embedder for Google's Gemini API,
// speaking its REST protocol (v1beta streamGenerateContent with alt=sse, and
// batchEmbedContents). The conversions between datachat's model types and the
// wire format are pure functions; internal/llm does the calling.
package gemini

import (
	"cmp"
	"context"
	"io"
	"net/url"
	"strings"

	"datachat"
	"datachat/internal/llm"
)

// Defaults.
const (
	DefaultBaseURL        = "https://generativelanguage.googleapis.com"
	DefaultModel          = llm.GeminiModel
	DefaultEmbeddingModel = llm.GeminiEmbeddingModel
	apiVersion            = "v1beta"
	maxEmbedBatch         = 100 // batchEmbedContents' limit
)

var provider = llm.Provider{Name: "gemini", KeyVar: "GEMINI_API_KEY", URLVar: "GEMINI_BASE_URL", KeyHeader: "x-goog-api-key"}

// Options configure a [Client]. Zero values take the defaults; the Transport's
// are the llm package's.
type Options struct {
	APIKey         string
	BaseURL        string // GEMINI_BASE_URL; the API version is added unless the URL ends with one
	Model          string // CHAT_MODEL
	EmbeddingModel string // EMBEDDING_MODEL
	llm.Transport
}

// Client is a Gemini chat model ([Client.Stream]) and embedder
// ([Client.Embed]). It is safe for concurrent use.
type Client struct {
	llm.Names
	opts Options
	base string // ends with the API version, e.g. https://…/v1beta
	llm  *llm.Client
}

// New returns a Client for opts.
func New(opts Options) *Client {
	opts.BaseURL = cmp.Or(opts.BaseURL, DefaultBaseURL)
	opts.Model = cmp.Or(opts.Model, DefaultModel)
	opts.EmbeddingModel = cmp.Or(opts.EmbeddingModel, DefaultEmbeddingModel)
	return &Client{
		Names: llm.Names{Provider: provider.Name, Model: opts.Model, EmbeddingModel: opts.EmbeddingModel},
		opts:  opts,
		base:  versionedBase(opts.BaseURL),
		llm: llm.NewClient(llm.Config{
			Provider:          provider,
			Transport:         opts.Transport,
			Secrets:           []string{opts.APIKey},
			ErrorFromResponse: mapError,
		}),
	}
}

// Stream sends req to streamGenerateContent and calls emit for each text
// delta and function call, then the finish reason and one Usage event. Errors
// are *datachat.ProviderError (auth also for Gemini's 400 API_KEY_INVALID,
// context_too_large for "input token count … exceeds the maximum"), an error
// from emit, or one wrapping ctx.Err().
func (c *Client) Stream(ctx context.Context, req *datachat.ModelRequest, emit func(datachat.ModelEvent) error) error {
	if err := c.configured(); err != nil {
		return err
	}
	model := modelName(req.Model, c.opts.Model)
	wire, err := toRequest(req)
	if err != nil {
		return llm.RequestError(provider, err)
	}
	u := c.base + "/models/" + url.PathEscape(model) + ":streamGenerateContent?alt=sse"
	r := llm.ChatRequest(u, provider.Header(c.opts.APIKey), model, req)
	return c.llm.StreamJSON(ctx, r, wire, emit, llm.WithCallIDs(decodeStream))
}

// decodeStream reads an SSE answer into out.
func decodeStream(body io.Reader, out *llm.Output, newID func() string) error {
	return llm.DecodeFrames(llm.NewSSEReader(body).NextData, out, &decoder{newID: newID})
}

// Embed returns one vector per text from batchEmbedContents, in order.
func (c *Client) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := c.configured(); err != nil {
		return nil, err
	}
	model := modelName("", c.opts.EmbeddingModel)
	return llm.Embed(ctx, c.llm, texts, maxEmbedBatch, func(batch []string) (llm.Request, any) {
		wire := embedRequest{Requests: make([]embedContentRequest, len(batch))}
		for i, t := range batch {
			wire.Requests[i] = embedContentRequest{Model: "models/" + model, Content: content{Parts: []part{{Text: t}}}}
		}
		r := llm.Request{
			URL:    c.base + "/models/" + url.PathEscape(model) + ":batchEmbedContents",
			Header: provider.Header(c.opts.APIKey), Model: model, Messages: len(batch),
		}
		return r, wire
	}, func(resp *embedResponse) [][]float32 {
		vectors := make([][]float32, len(resp.Embeddings))
		for i, e := range resp.Embeddings {
			vectors[i] = e.Values
		}
		return vectors
	})
}

func (c *Client) configured() error {
	if c.opts.APIKey == "" && strings.TrimRight(c.opts.BaseURL, "/") == DefaultBaseURL {
		return llm.NotConfiguredError(provider, "No Gemini API key is set")
	}
	return nil
}

// versionedBase appends the API version to a base URL that names none.
func versionedBase(base string) string {
	base = strings.TrimRight(base, "/")
	last := base[strings.LastIndex(base, "/")+1:]
	if strings.HasPrefix(last, "v1") && !strings.Contains(last, ".") {
		return base
	}
	return base + "/" + apiVersion
}

func modelName(requested, fallback string) string {
	m := requested
	if m == "" {
		m = fallback
	}
	return strings.TrimPrefix(m, "models/")
}
