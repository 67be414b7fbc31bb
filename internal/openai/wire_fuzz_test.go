package openai

import (
	"strings"
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

// recordedStreams are the recorded answers, in ../shared.
var recordedStreams = []string{"openai_stream_tool_calls_parallel.sse", "openai_stream_tool_call_single.sse", "openai_stream_text_after_tool_results.sse"}

// FuzzReadChunk checks readChunk against encoding/json ([llmtest.FuzzReader]).
func FuzzReadChunk(f *testing.F) {
	llmtest.SeedFrames(f, llmtest.OpenAI, recordedStreams...)
	for _, s := range []string{
		`{"choices":[{"index":0,"delta":{"content":"a\u00e9\ud83d\ude00\ud83d\u0041\udc00 \"q\" \\ \/ \b\f\n\r\t"},"finish_reason":null}]}`,
		"{\"choices\":[{\"delta\":{\"content\":\"\xff\xfe bad \xed\xa0\x80 utf-8 \xe2\x82\"}}]}",
		`{"choices":[{"delta":{"content":"a","content":"b"}}]}`,
		`{"choices":[{"delta":{"content":"a","Content":"b"}}]}`,
		`{"choices":[{"delta":{"CONTENT":"a"}}],"Usage":{"prompt_tokens":1}}`,
		"{\"choices\":[{\"delta\":{\"content\":\"a\"},\"index\":0,\"\\u0069ndex\":1}]}",
		"{\"choices\":[{\"\u212aey\":1,\"inde\u212a\":1,\"finiſh_reason\":\"x\"}]}",
		`{"choices":[{"index":1.0}]}`, `{"choices":[{"index":1e2}]}`, `{"choices":[{"index":-0}]}`,
		`{"choices":[{"index":9223372036854775808}]}`, `{"choices":[{"index":-9223372036854775808}]}`,
		`{"choices":[{"index":"0"}]}`, `{"choices":[{"index":null,"delta":null,"finish_reason":null}]}`,
		`{"choices":null,"usage":null,"error":null}`, `{"choices":[],"usage":{},"error":{}}`,
		`{"usage":{"prompt_tokens":1},"usage":{"completion_tokens":2}}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}},{"function":null}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":null,"id":null}]}}]}`,
		`{"error":"boom","choices":{}}`, `{"error":[1,{"a":[true,false,null,-1.5e+3]}]}`,
		`null`, ` {} `, `{}x`, `{"a":1,}`, `[{}]`, `"x"`, ``, "\xef\xbb\xbf{}", `{"choices":[{}]`,
		`{"x":` + strings.Repeat("[", 1100) + strings.Repeat("]", 1100) + `}`,
	} {
		f.Add([]byte(s))
	}
	llmtest.FuzzReader(f, readChunk)
}

func TestReadChunk(t *testing.T) {
	llmtest.CheckReader(t, llmtest.OpenAI, readChunk, recordedStreams...)
}
