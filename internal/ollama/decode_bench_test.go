package ollama

import (
	"testing"

	"datachat/internal/llmtest"
)

// BenchmarkDecodeStream decodes a text answer of 40 chunks and a tool-call
// answer as the fake server streams them ([llmtest.BenchmarkDecodeStream]).
func BenchmarkDecodeStream(b *testing.B) {
	llmtest.BenchmarkDecodeStream(b, llmtest.Ollama, decodeStream)
}
