package gemini

import (
	"testing"

	"datachat/internal/llmtest"
)

// FuzzMapError feeds arbitrary error answers (status and body) to mapError,
// which turns what the provider says went wrong into the chat_error a person
// reads ([llmtest.FuzzMapError]).
func FuzzMapError(f *testing.F) {
	// The recorded error answers, when ../shared is present.
	llmtest.SeedRecordedError(f, 400, "gemini_error_400_api_key_invalid.json")
	llmtest.SeedRecordedError(f, 403, "gemini_error_403_permission_denied.json")
	llmtest.SeedRecordedError(f, 429, "gemini_error_429_resource_exhausted.json")
	f.Add(400, []byte(`{"error":{"code":400,"message":"bad key","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`))
	f.Add(403, []byte(`{"error":{"code":403,"message":"denied","status":"PERMISSION_DENIED"}}`))
	f.Add(400, []byte(`{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`))
	f.Add(429, []byte(`{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"-9999999999s"}]}}`))
	f.Add(0, []byte(`{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`))
	f.Add(502, []byte("<html>Bad Gateway</html>"))
	f.Add(200, []byte(""))
	llmtest.FuzzMapError(f, mapError)
}
