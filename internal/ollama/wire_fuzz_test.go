package ollama

import (
	"testing"

	"datachat/internal/llmtest"
)

// FuzzMapError feeds arbitrary error answers (status and body) to mapError,
// which turns what the provider says went wrong into the chat_error a person
// reads ([llmtest.FuzzMapError]).
func FuzzMapError(f *testing.F) {
	// The recorded error answer, when ../shared is present.
	llmtest.SeedRecordedError(f, 400, "ollama_error_400_tools_unsupported.json")
	f.Add(400, []byte(`{"error":"llama3.1 does not support tools"}`))
	f.Add(404, []byte(`{"error":"model \"llama3.1\" not found, try pulling it first"}`))
	f.Add(0, []byte(`{"error":"input length exceeds the context length"}`))
	f.Add(500, []byte("\xff\xfe not json"))
	f.Add(502, []byte("<html>Bad Gateway</html>"))
	f.Add(200, []byte(""))
	llmtest.FuzzMapError(f, mapError)
}
