// Package openai is the chat model and embedder for OpenAI and servers that
// speak its Chat Completions protocol (vLLM, llama.cpp, LM Studio, Ollama's
// /v1, …): streamed /chat/completions with tools and include_usage, and
// /embeddings. The conversions between datachat's model types and the wire
// format are pure functions; internal/llm does the calling.
package openai

import (
	"cmp"
	"context"
	"io"
	"net/url"
	"sort"
	"strings"

	"datachat"
	"datachat/internal/llm"
)

// Defaults.
const (
	DefaultBaseURL        = "https://api.openai.com/v1"
	DefaultModel          = llm.OpenAIModel
	DefaultEmbeddingModel = llm.OpenAIEmbeddingModel
	maxEmbedBatch         = 256
)

var provider = llm.Provider{Name: "openai", KeyVar: "OPENAI_API_KEY", URLVar: "OPENAI_BASE_URL", KeyHeader: "Authorization", KeyPrefix: "Bearer "}

// Options configure a [Client]. Zero values take the defaults; the Transport's
// are the llm package's.
type Options struct {
	APIKey         string
	BaseURL        string // OPENAI_BASE_URL, including the version path (…/v1)
	Model          string // CHAT_MODEL
	EmbeddingModel string // EMBEDDING_MODEL
	llm.Transport
}

// Client is an OpenAI-compatible chat model ([Client.Stream]) and embedder
// ([Client.Embed]). It is safe for concurrent use.
type Client struct {
	llm.Names
	opts     Options
	base     string
	official bool // api.openai.com
	llm      *llm.Client
}

// New returns a Client for opts.
func New(opts Options) *Client {
	opts.BaseURL = cmp.Or(opts.BaseURL, DefaultBaseURL)
	opts.Model = cmp.Or(opts.Model, DefaultModel)
	opts.EmbeddingModel = cmp.Or(opts.EmbeddingModel, DefaultEmbeddingModel)
	base := strings.TrimRight(opts.BaseURL, "/")
	u, _ := url.Parse(base)
	return &Client{
		Names:    llm.Names{Provider: provider.Name, Model: opts.Model, EmbeddingModel: opts.EmbeddingModel},
		opts:     opts,
		base:     base,
		official: u != nil && u.Hostname() == "api.openai.com",
		llm: llm.NewClient(llm.Config{
			Provider:          provider,
			Transport:         opts.Transport,
			Secrets:           []string{opts.APIKey},
			ErrorFromResponse: mapError,
		}),
	}
}

// Stream sends req to /chat/completions with stream:true and calls emit for
// each text delta and each assembled tool call, then the finish reason and
// one Usage event. Errors are *datachat.ProviderError (context_too_large for
// code context_length_exceeded), an error from emit, or one wrapping
// ctx.Err().
func (c *Client) Stream(ctx context.Context, req *datachat.ModelRequest, emit func(datachat.ModelEvent) error) error {
	if err := c.configured(); err != nil {
		return err
	}
	model := cmp.Or(req.Model, c.opts.Model)
	wire, err := toRequest(req, wireOptions{model: model, maxCompletionTokens: c.official})
	if err != nil {
		return llm.RequestError(provider, err)
	}
	h := provider.Header(c.opts.APIKey)
	h.Set("Accept", "text/event-stream")
	r := llm.ChatRequest(c.base+"/chat/completions", h, model, req)
	return c.llm.StreamJSON(ctx, r, wire, emit, llm.WithCallIDs(decodeStream))
}

// decodeStream reads an SSE answer into out.
func decodeStream(body io.Reader, out *llm.Output, newID func() string) error {
	return llm.DecodeFrames(llm.NewSSEReader(body).NextData, out, &decoder{newID: newID})
}

// Embed returns one vector per text from /embeddings, in order.
func (c *Client) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := c.configured(); err != nil {
		return nil, err
	}
	model := c.opts.EmbeddingModel
	return llm.Embed(ctx, c.llm, texts, maxEmbedBatch, func(batch []string) (llm.Request, any) {
		r := llm.Request{URL: c.base + "/embeddings", Header: provider.Header(c.opts.APIKey), Model: model, Messages: len(batch)}
		return r, embedRequest{Model: model, Input: batch, EncodingFormat: "float"}
	}, func(resp *embedResponse) [][]float32 {
		sort.SliceStable(resp.Data, func(i, j int) bool { return resp.Data[i].Index < resp.Data[j].Index })
		vectors := make([][]float32, len(resp.Data))
		for i, d := range resp.Data {
			vectors[i] = d.Embedding
		}
		return vectors
	})
}

func (c *Client) configured() error {
	if c.opts.APIKey == "" && c.official {
		return llm.NotConfiguredError(provider, "No OpenAI API key is set")
	}
	return nil
}
