package openai

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
	addSeed(f, 401, "openai_error_401_invalid_api_key.json")
	f.Add(401, []byte("{\n    \"error\": {\n        \"message\": \"bad key\",\n        \"type\": \"invalid_request_error\",\n        \"param\": null,\n        \"code\": \"invalid_api_key\"\n    }\n}\n"))
	f.Add(400, []byte(`{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`))
	f.Add(0, []byte(`{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}`))
	f.Add(422, []byte(`{"detail":[{"loc":["body"],"msg":"field required"}]}`))
	f.Add(500, []byte(`{"error":"plain string"}`))
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
