package gemini

import (
	"strings"
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

// recordedStreams are the recorded answers, in ../shared.
var recordedStreams = []string{"gemini_stream_text_after_function_response.sse", "gemini_stream_function_call_parallel.sse", "gemini_stream_function_call_single.sse"}

func TestReadResponse(t *testing.T) {
	llmtest.CheckReader(t, llmtest.Gemini, readResponse, recordedStreams...)
}

// FuzzReadResponse checks readResponse against encoding/json
// ([llmtest.FuzzReader]).
func FuzzReadResponse(f *testing.F) {
	llmtest.SeedFrames(f, llmtest.Gemini, recordedStreams...)
	for _, s := range []string{
		`{"candidates": [{"content": {"parts": [{"text": "a\u00e9\ud83d\ude00\ud83d\u0041\udc00 \"q\" \\ \/ \b\f\n\r\t"}],"role": "model"},"index": 0}]}`,
		"{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"\xff\xfe bad \xed\xa0\x80 utf-8 \xe2\x82\"}]}}]}",
		`{"candidates":[{"content":{"parts":[{"text":"a","text":"b"}]}}]}`, `{"candidates":[{"content":{"parts":[{"text":"a","Text":"b"}]}}]}`,
		"{\"candidates\":[{\"finiſhReason\":\"STOP\",\"index\":0,\"\\u0069ndex\":1}],\"usageMetadata\":{\"totalTo\u212aenCount\":1}}",
		`{"candidates":[{"index":1.0}]}`, `{"candidates":[{"index":"0"}]}`, `{"usageMetadata":{"promptTokenCount":1e2}}`,
		`{"usageMetadata":{"promptTokenCount":-0,"candidatesTokenCount":9223372036854775807,"thoughtsTokenCount":null}}`,
		`{"candidates":[{"content":{"parts":[{"thought":true,"text":"hm"},{"thought":"yes"}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"id":"a","name":"f","args":{"x":[1,{"y":null}]}},"thoughtSignature":"c2ln"}]},"finishReason":"STOP"}]}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":null}},{"functionCall":null},{"functionCall":{"args":[1]}}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"functionResponse":{"name":"f","response":{"result":1}}}]}}]}`,
		`{"candidates":[{"content":{"parts":[{"functionResponse":null}]}}]}`,
		`{"candidates":null,"promptFeedback":null,"usageMetadata":null,"error":null}`, `{"candidates":[],"promptFeedback":{"blockReason":"SAFETY"}}`,
		`{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE","details":[{"@type":"x"}]}}`, `{"error":"x"}`,
		`{"usageMetadata":{"promptTokenCount":1},"usageMetadata":{"totalTokenCount":2}}`,
		`null`, ` {} `, `{}x`, `{"a":1,}`, `[{}]`, `"x"`, ``, "\xef\xbb\xbf{}", `{"candidates":[{}]`,
		`{"x":` + strings.Repeat("[", 1100) + strings.Repeat("]", 1100) + `}`,
	} {
		f.Add([]byte(s))
	}
	llmtest.FuzzReader(f, readResponse)
}
