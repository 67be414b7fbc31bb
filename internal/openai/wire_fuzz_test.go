package openai

import (
	"testing"

	"datachat/internal/llmtest"
)

// FuzzMapError feeds arbitrary error answers (status and body) to mapError,
// which turns what the provider says went wrong into the chat_error a person
// reads ([llmtest.FuzzMapError]).
func FuzzMapError(f *testing.F) {
	// The recorded error answer, when ../shared is present.
	llmtest.SeedRecordedError(f, 401, "openai_error_401_invalid_api_key.json")
	f.Add(401, []byte("{\n    \"error\": {\n        \"message\": \"bad key\",\n        \"type\": \"invalid_request_error\",\n        \"param\": null,\n        \"code\": \"invalid_api_key\"\n    }\n}\n"))
	f.Add(400, []byte(`{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`))
	f.Add(0, []byte(`{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}`))
	f.Add(422, []byte(`{"detail":[{"loc":["body"],"msg":"field required"}]}`))
	f.Add(500, []byte(`{"error":"plain string"}`))
	f.Add(502, []byte("<html>Bad Gateway</html>"))
	f.Add(200, []byte(""))
	llmtest.FuzzMapError(f, mapError)
}
