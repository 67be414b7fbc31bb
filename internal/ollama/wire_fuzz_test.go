package ollama

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
	llmtest.SeedRecordedError(f, 400, "ollama_error_400_tools_unsupported.json")
	f.Add(400, []byte(`{"error":"llama3.1 does not support tools"}`))
	f.Add(404, []byte(`{"error":"model \"llama3.1\" not found, try pulling it first"}`))
	f.Add(0, []byte(`{"error":"input length exceeds the context length"}`))
	f.Add(500, []byte("\xff\xfe not json"))
	f.Add(502, []byte("<html>Bad Gateway</html>"))
	f.Add(200, []byte(""))
	llmtest.FuzzMapError(f, mapError)
}

// recordedStreams are the recorded answers, in ../shared.
var recordedStreams = []string{"ollama_chat_stream_text.ndjson", "ollama_chat_stream_tool_call.ndjson"}

func TestReadChatResponse(t *testing.T) {
	llmtest.CheckReader(t, llmtest.Ollama, readChatResponse, recordedStreams...)
}

// FuzzReadChatResponse checks readChatResponse against encoding/json
// ([llmtest.FuzzReader]).
func FuzzReadChatResponse(f *testing.F) {
	llmtest.SeedFrames(f, llmtest.Ollama, recordedStreams...)
	for _, s := range []string{
		`{"message":{"role":"assistant","content":"a\u00e9\ud83d\ude00\ud83d\u0041\udc00 \"q\" \\ \/ \b\f\n\r\t"},"done":false}`,
		"{\"message\":{\"content\":\"\xff\xfe bad \xed\xa0\x80 utf-8 \xe2\x82\"},\"done\":false}",
		`{"message":{"content":"a","content":"b"}}`, `{"message":{"content":"a","Content":"b"}}`, `{"Done":true,"DONE":false}`,
		"{\"message\":{\"\\u0063ontent\":\"escaped key\",\"thinkin\u212a\":\"x\",\"role\":\"ſystem\"},\"done_reaſon\":\"x\"}",
		`{"done":1}`, `{"done":"true"}`, `{"done":null,"done_reason":null,"error":null,"message":null}`,
		`{"eval_count":1.0}`, `{"eval_count":1e2}`, `{"prompt_eval_count":-0,"eval_count":9223372036854775807}`, `{"eval_count":9223372036854775808}`,
		`{"message":{"tool_calls":[{"id":"a","type":"function","function":{"index":0,"name":"f","arguments":{"x":[1,{"y":null}]}}}]}}`,
		`{"message":{"tool_calls":[{"function":{"index":null,"arguments":"{\"x\":1}"}},{"function":{"arguments":null}},{}]}}`,
		`{"message":{"tool_calls":[{"function":{"arguments":}}]}}`, `{"message":{"tool_calls":{}}}`,
		`{"error":"boom"}`, `{"error":{"message":"boom"}}`, `{"error":null}`,
		`{"message":{"role":"assistant"},"message":{"content":"merged"}}`,
		`null`, ` {} `, `{}x`, `{"a":1,}`, `[{}]`, `"x"`, ``, "\xef\xbb\xbf{}", `{"message":{}`,
		`{"x":` + strings.Repeat("[", 1100) + strings.Repeat("]", 1100) + `}`,
	} {
		f.Add([]byte(s))
	}
	llmtest.FuzzReader(f, readChatResponse)
}
