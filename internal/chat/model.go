// Package chat runs a chat turn: the system prompt, the tool loop and its limits,
// context pruning, confirmation and usage accounting.
package chat

import (
	"context"

	"datachat"
)

// Model is a streaming chat model. internal/gemini, internal/openai and
// internal/ollama implement it.
type Model interface {
	// Stream sends req and calls emit for each event of the answer, in order,
	// until the answer ends or emit returns an error (which Stream returns).
	// Failures are *datachat.ProviderError.
	Stream(ctx context.Context, req *datachat.ModelRequest, emit func(datachat.ModelEvent) error) error
}
