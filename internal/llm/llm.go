// Package llm is what calling an LLM over HTTP needs, shared by the provider
// packages (internal/gemini, internal/openai, internal/ollama): an HTTP client
// with connect, write and stream-idle timeouts, the retry-once rule,
// SSE and NDJSON readers, the mapping of failures to *datachat.ProviderError, and
// the request log (llm_request_started, llm_response_chunk,
// llm_request_completed).
//
// A provider package builds the wire request with pure conversion functions and
// hands it to [Client.StreamJSON] with a decode function that turns the response
// body into [datachat.ModelEvent]s through an [Output], usually by feeding its
// [FrameDecoder] to [DecodeFrames]; [Embed] does the batching of embeddings.
package llm

import (
	"context"
	"net/http"
	"time"
)

// Defaults of LLM_CONNECT_TIMEOUT, LLM_STREAM_IDLE_TIMEOUT and
// LLM_RETRY_DELAY.
const (
	DefaultConnectTimeout    = 10 * time.Second
	DefaultWriteTimeout      = 10 * time.Second
	DefaultStreamIdleTimeout = 60 * time.Second
	DefaultRetryDelay        = 2 * time.Second
)

// Finish reasons, normalized from each provider's own vocabulary. A reason a
// provider sends that has no equivalent here is passed on lower-cased.
const (
	FinishStop          = "stop"           // the model finished its answer
	FinishToolCalls     = "tool_calls"     // the answer ends with tool calls
	FinishLength        = "length"         // the output token limit was reached
	FinishContentFilter = "content_filter" // the provider withheld the answer
)

// Provider describes a provider for messages people read (its name and the
// environment variables that configure it) and how it is sent its API key.
type Provider struct {
	Name   string // "gemini", "openai", "ollama"
	KeyVar string // variable holding the API key, "" if none is needed
	URLVar string // variable holding the base URL or host
	// KeyHeader carries the API key, after KeyPrefix: "Authorization" with
	// "Bearer " for OpenAI and Ollama, "x-goog-api-key" for Gemini.
	KeyHeader string
	KeyPrefix string
}

// Header returns the header of a JSON request to p, with key in
// p.KeyHeader unless key is "".
func (p Provider) Header(key string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	if key != "" {
		h.Set(p.KeyHeader, p.KeyPrefix+key)
	}
	return h
}

type requestIDKey struct{}

// WithRequestID returns a context carrying id, which the request log records as
// request_id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the id put in ctx by [WithRequestID], or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// orDefault returns d when v is zero, and v otherwise. A negative v is kept: it
// turns the timeout off.
func orDefault(v, d time.Duration) time.Duration {
	if v == 0 {
		return d
	}
	return v
}
