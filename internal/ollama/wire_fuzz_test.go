package ollama

import (
	"net/http"
	"testing"

	"datachat"
	"datachat/internal/sharedtest"
)

// FuzzMapError feeds arbitrary error answers (status and body) to mapError,
// which turns what the provider says went wrong into the chat_error a person
// reads. (The Retry-After header is left out: see BENCHMARKS.md, fuzzing.)
func FuzzMapError(f *testing.F) {
	// The recorded error answer, when ../shared is present.
	addSeed := func(f *testing.F, status int, name string) {
		if b := sharedtest.Seed(f, "fixtures/providers/"+name); b != nil {
			f.Add(status, b)
		}
	}
	addSeed(f, 400, "ollama_error_400_tools_unsupported.json")
	f.Add(400, []byte(`{"error":"llama3.1 does not support tools"}`))
	f.Add(404, []byte(`{"error":"model \"llama3.1\" not found, try pulling it first"}`))
	f.Add(0, []byte(`{"error":"input length exceeds the context length"}`))
	f.Add(500, []byte("\xff\xfe not json"))
	f.Add(502, []byte("<html>Bad Gateway</html>"))
	f.Add(200, []byte(""))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 0 || status > 999 {
			return // not an HTTP status
		}
		pe := mapError(status, http.Header{}, body)
		if pe == nil {
			t.Fatal("mapError returned nil")
		}
		switch pe.Kind {
		case datachat.ProviderAuth, datachat.ProviderRateLimited, datachat.ProviderUnavailable, datachat.ProviderBadRequest,
			datachat.ProviderContextTooLarge, datachat.ProviderMalformed, datachat.ProviderTimeout, datachat.ProviderConnection:
		default:
			t.Fatalf("mapError(%d, %q): kind %q", status, body, pe.Kind)
		}
		if pe.Reason == "" {
			t.Fatalf("mapError(%d, %q): no reason for the user", status, body)
		}
		if pe.RetryAfter < 0 {
			t.Fatalf("mapError(%d, %q): negative retry-after %v", status, body, pe.RetryAfter)
		}
	})
}
