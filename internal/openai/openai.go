// Package openai is the chat model and embedder for OpenAI and servers that
// speak its Chat Completions protocol (vLLM, llama.cpp, LM Studio, Ollama's
// /v1, …): streamed /chat/completions with tools and include_usage, and
// /embeddings. The conversions between datachat's model types and the wire
// format are pure functions; internal/llm does the calling.
package openai

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"datachat"
	"datachat/internal/llm"
)

// Defaults.
const (
	DefaultBaseURL        = "https://api.openai.com/v1"
	DefaultModel          = "gpt-4o-mini"
	DefaultEmbeddingModel = "text-embedding-3-small"
	maxEmbedBatch         = 256
)

var provider = llm.Provider{Name: "openai", KeyVar: "OPENAI_API_KEY", URLVar: "OPENAI_BASE_URL"}

// Options configure a [Client]. Zero values take the defaults; zero durations
// take the llm package's (connect 10s, write 10s, stream idle 60s, retry delay 2s) and
// negative ones turn that timeout off.
type Options struct {
	APIKey            string
	BaseURL           string // OPENAI_BASE_URL, including the version path (…/v1)
	Model             string // CHAT_MODEL
	EmbeddingModel    string // EMBEDDING_MODEL
	HTTPClient        *http.Client
	ConnectTimeout    time.Duration
	WriteTimeout      time.Duration
	StreamIdleTimeout time.Duration
	RetryDelay        time.Duration
	Logger            *slog.Logger
}

// Client is an OpenAI-compatible chat model ([Client.Stream]) and embedder
// ([Client.Embed]). It is safe for concurrent use.
type Client struct {
	opts     Options
	base     string
	official bool // api.openai.com
	llm      *llm.Client
}

// New returns a Client for opts.
func New(opts Options) *Client {
	if opts.BaseURL == "" {
		opts.BaseURL = DefaultBaseURL
	}
	if opts.Model == "" {
		opts.Model = DefaultModel
	}
	if opts.EmbeddingModel == "" {
		opts.EmbeddingModel = DefaultEmbeddingModel
	}
	base := strings.TrimRight(opts.BaseURL, "/")
	u, _ := url.Parse(base)
	return &Client{
		opts:     opts,
		base:     base,
		official: u != nil && u.Hostname() == "api.openai.com",
		llm: llm.NewClient(llm.Config{
			Provider:          provider,
			HTTPClient:        opts.HTTPClient,
			ConnectTimeout:    opts.ConnectTimeout,
			WriteTimeout:      opts.WriteTimeout,
			StreamIdleTimeout: opts.StreamIdleTimeout,
			RetryDelay:        opts.RetryDelay,
			Logger:            opts.Logger,
			Secrets:           []string{opts.APIKey},
			ErrorFromResponse: mapError,
		}),
	}
}

// Name returns "openai".
func (c *Client) Name() string { return provider.Name }

// ModelName returns the chat model used when a request names none.
func (c *Client) ModelName() string { return c.opts.Model }

// EmbeddingModelName returns the embedding model.
func (c *Client) EmbeddingModelName() string { return c.opts.EmbeddingModel }

// Stream sends req to /chat/completions with stream:true and calls emit for
// each text delta and each assembled tool call, then the finish reason and
// one Usage event. Errors are *datachat.ProviderError (context_too_large for
// code context_length_exceeded), an error from emit, or one wrapping
// ctx.Err().
func (c *Client) Stream(ctx context.Context, req *datachat.ModelRequest, emit func(datachat.ModelEvent) error) error {
	if err := c.configured(); err != nil {
		return err
	}
	model := req.Model
	if model == "" {
		model = c.opts.Model
	}
	wire, err := toRequest(req, wireOptions{model: model, maxCompletionTokens: c.official})
	if err != nil {
		return llm.RequestError(provider, err)
	}
	body, err := json.Marshal(wire)
	if err != nil {
		return fmt.Errorf("openai: encode request: %w", err)
	}
	h := c.header()
	h.Set("Accept", "text/event-stream")
	r := llm.Request{
		URL: c.base + "/chat/completions", Header: h, Body: body,
		Model: model, Messages: len(req.Messages), Tools: len(req.Tools),
	}
	return c.llm.Stream(ctx, r, emit, func(body io.Reader, out *llm.Output) error {
		return decodeStream(body, out, newCallID)
	})
}

// decodeStream reads an SSE answer into out.
func decodeStream(body io.Reader, out *llm.Output, newID func() string) error {
	d := &decoder{newID: newID}
	events := llm.NewSSEReader(body)
	for !d.done {
		ev, err := events.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		out.Chunk(ev.Data)
		got, derr := d.feed(ev.Data)
		if d.usage != nil {
			out.SetUsage(*d.usage)
		}
		for _, e := range got {
			if err := out.Emit(e); err != nil {
				return err
			}
		}
		if derr != nil {
			return derr
		}
	}
	got, reason, err := d.end()
	for _, e := range got {
		if err := out.Emit(e); err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	return out.Finish(reason)
}

// Embed returns one vector per text from /embeddings, in order.
func (c *Client) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := c.configured(); err != nil {
		return nil, err
	}
	model := c.opts.EmbeddingModel
	vectors := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += maxEmbedBatch {
		batch := texts[start:min(start+maxEmbedBatch, len(texts))]
		body, err := json.Marshal(embedRequest{Model: model, Input: batch, EncodingFormat: "float"})
		if err != nil {
			return nil, fmt.Errorf("openai: encode embedding request: %w", err)
		}
		r := llm.Request{URL: c.base + "/embeddings", Header: c.header(), Body: body, Model: model, Messages: len(batch)}
		err = c.llm.Do(ctx, r, func(b []byte) error {
			var resp embedResponse
			if err := json.Unmarshal(b, &resp); err != nil {
				return llm.MalformedError(provider, fmt.Errorf("decode embeddings: %w", err))
			}
			if len(resp.Data) != len(batch) {
				return llm.MalformedError(provider, fmt.Errorf("got %d embeddings for %d texts", len(resp.Data), len(batch)))
			}
			sort.SliceStable(resp.Data, func(i, j int) bool { return resp.Data[i].Index < resp.Data[j].Index })
			for _, d := range resp.Data {
				vectors = append(vectors, d.Embedding)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return vectors, nil
}

func (c *Client) configured() error {
	if c.opts.APIKey == "" && c.official {
		return llm.NotConfiguredError(provider, "No OpenAI API key is set")
	}
	return nil
}

func (c *Client) header() http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	if c.opts.APIKey != "" {
		h.Set("Authorization", "Bearer "+c.opts.APIKey)
	}
	return h
}

// newCallID names a tool call a compatible server sent without an id.
func newCallID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}
