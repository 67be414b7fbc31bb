package gemini

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
	// The recorded error answers, when ../shared is present.
	addSeed := func(f *testing.F, status int, name string) {
		if b := sharedtest.Seed(f, "fixtures/providers/"+name); b != nil {
			f.Add(status, b)
		}
	}
	addSeed(f, 400, "gemini_error_400_api_key_invalid.json")
	addSeed(f, 403, "gemini_error_403_permission_denied.json")
	addSeed(f, 429, "gemini_error_429_resource_exhausted.json")
	f.Add(400, []byte(`{"error":{"code":400,"message":"bad key","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`))
	f.Add(403, []byte(`{"error":{"code":403,"message":"denied","status":"PERMISSION_DENIED"}}`))
	f.Add(400, []byte(`{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`))
	f.Add(429, []byte(`{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"-9999999999s"}]}}`))
	f.Add(0, []byte(`{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`))
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
