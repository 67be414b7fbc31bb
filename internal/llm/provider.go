package llm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"datachat"
)

// This file holds what every provider package does the same way around its
// own wire format: describing a chat request for the log, encoding the
// request, reading a streamed answer frame by frame, embedding in batches and
// naming tool calls that came without an id.

// ChatRequest is the Request for a streamed chat answer to req from model,
// sent to url with header; the log counts req's messages and tools.
func ChatRequest(url string, header http.Header, model string, req *datachat.ModelRequest) Request {
	return Request{URL: url, Header: header, Model: model, Messages: len(req.Messages), Tools: len(req.Tools)}
}

// StreamJSON is [Client.Stream] with req's Body the JSON encoding of wire.
func (c *Client) StreamJSON(ctx context.Context, req Request, wire any, emit func(datachat.ModelEvent) error, decode DecodeFunc) error {
	body, err := json.Marshal(wire)
	if err != nil {
		return fmt.Errorf("%s: encode request: %w", c.cfg.Provider.Name, err)
	}
	req.Body = body
	return c.Stream(ctx, req, emit, decode)
}

// FrameDecoder is a provider's pure decoder of a streamed answer, fed one
// frame (an SSE event's data, an NDJSON line) at a time by [DecodeFrames].
type FrameDecoder interface {
	// Feed decodes one frame into model events; it may return events along
	// with an error. The frame is valid only during the call (its reader
	// reuses the memory): what an event keeps of it is copied.
	Feed(frame []byte) ([]datachat.ModelEvent, error)
	// Usage returns the token counts reported so far, nil for none.
	Usage() *datachat.TokenCount
	// Done reports that the answer's end marker was read: no frame after it
	// is read.
	Done() bool
	// End returns what the frames leave once they ended: the last events,
	// the finish reason, or an error for an answer cut short.
	End() ([]datachat.ModelEvent, string, error)
}

// DecodeFrames reads frames from next until io.EOF or until d is done, and
// reports through out each frame, the usage and the events d decodes from it,
// then d's end and the finish reason.
func DecodeFrames(next func() ([]byte, error), out *Output, d FrameDecoder) error {
	for !d.Done() {
		frame, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		out.Chunk(frame)
		got, derr := d.Feed(frame)
		if u := d.Usage(); u != nil {
			out.SetUsage(*u)
		}
		if err := out.emitAll(got); err != nil {
			return err
		}
		if derr != nil {
			return derr
		}
	}
	got, reason, err := d.End()
	if err := out.emitAll(got); err != nil {
		return err
	}
	if err != nil {
		return err
	}
	return out.Finish(reason)
}

func (o *Output) emitAll(events []datachat.ModelEvent) error {
	for _, e := range events {
		if err := o.Emit(e); err != nil {
			return err
		}
	}
	return nil
}

// Embed embeds texts in batches of at most size, one [Client.Do] each, and
// returns the vectors in order. request gives a batch's request and its wire
// body, to be JSON-encoded; vectors gives the embeddings of an answer decoded
// into an R, which must hold one per text of the batch (else a
// [MalformedError]).
func Embed[R any](ctx context.Context, c *Client, texts []string, size int, request func(batch []string) (Request, any), vectors func(*R) [][]float32) ([][]float32, error) {
	p := c.cfg.Provider
	all := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += size {
		batch := texts[start:min(start+size, len(texts))]
		req, wire := request(batch)
		body, err := json.Marshal(wire)
		if err != nil {
			return nil, fmt.Errorf("%s: encode embedding request: %w", p.Name, err)
		}
		req.Body = body
		err = c.Do(ctx, req, func(b []byte) error {
			var resp R
			if err := json.Unmarshal(b, &resp); err != nil {
				return MalformedError(p, fmt.Errorf("decode embeddings: %w", err))
			}
			got := vectors(&resp)
			if len(got) != len(batch) {
				return MalformedError(p, fmt.Errorf("got %d embeddings for %d texts", len(got), len(batch)))
			}
			all = append(all, got...)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return all, nil
}

// WithCallIDs turns a provider's decoder, which takes what names tool calls
// that came without an id, into a [DecodeFunc] naming them with [NewCallID].
func WithCallIDs(decode func(body io.Reader, out *Output, newID func() string) error) DecodeFunc {
	return func(body io.Reader, out *Output) error { return decode(body, out, NewCallID) }
}

// NewCallID names a tool call the provider sent without an id (Gemini's never
// carry one; compatible servers and older Ollama may omit it): datachat's tool
// rounds and the follow-up tool result need one.
func NewCallID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

// Names are what a provider's client is called and uses by default: the
// provider's name, and the chat and embedding models a request that names
// none gets. Each provider's Client embeds them.
type Names struct {
	Provider       string
	Model          string
	EmbeddingModel string
}

// Name returns the provider's name ("gemini", "openai", "ollama").
func (n Names) Name() string { return n.Provider }

// ModelName returns the chat model used when a request names none.
func (n Names) ModelName() string { return n.Model }

// EmbeddingModelName returns the embedding model.
func (n Names) EmbeddingModelName() string { return n.EmbeddingModel }
