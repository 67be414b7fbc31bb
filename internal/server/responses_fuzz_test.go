package server

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"datachat"
)

// FuzzResponseRequest: any body of POST /v1/responses is a turn or a
// refusal naming what is wrong, never a panic; a turn asks a question
// within the cap, and the ids it would answer with name its conversation.
func FuzzResponseRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"datachat","input":"How many?"}`,
		`{"model":"datachat","stream":true,"input":[{"role":"user","content":[{"type":"input_text","text":"How many?"}]}]}`,
		`{"model":"m","input":[{"role":"developer","content":"x"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a"}]},{"role":"user","content":"b"}]}`,
		`{"model":"m","previous_response_id":"resp_c1_0123456789abcdef","input":"q"}`,
		`{"model":"m","input":[{"type":"item_reference","id":"msg_c1_0123456789abcdef"},{"role":"user","content":"q"}]}`,
		`{"model":"m","input":"q","tool_choice":{"type":"allowed_tools","mode":"auto","tools":[]}}`,
		`{"model":"m","input":"q","tool_choice":"required"}`,
		`{"model":"m","input":"q","text":{"format":{"type":"json_object"}},"store":false,"background":true}`,
		`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`,
		`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":"x"},{"role":"user","content":"q"}]}`,
		`{"model":"m","input":[]}`, `{"model":"m","input":null}`, `{"model":"m","input":42}`, `{}`, `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req responseRequest
		if json.Unmarshal(body, &req) != nil {
			return
		}
		rt, err := responseTurnOf(req, false, 2000)
		if err != nil {
			if datachat.ErrorCode(err) == "" || datachat.ErrorMessage(err) == "" || kindOf(err).status/100 != 4 {
				t.Fatalf("refusal without a client error's code and message: %v", err)
			}
			return
		}
		if strings.TrimSpace(rt.content) == "" || utf8.RuneCountInString(rt.content) > 2000 {
			t.Fatalf("turn asks %q", rt.content)
		}
		conv := "conv"
		if rt.conversation != "" {
			conv = rt.conversation
		}
		resp, item := newResponseIDs(conv)
		if got, ok := conversationOfID("resp_", resp); !ok || got != conv {
			t.Fatalf("response id %q names %q, want %q", resp, got, conv)
		}
		if got, ok := conversationOfID("msg_", item); !ok || got != conv {
			t.Fatalf("item id %q names %q, want %q", item, got, conv)
		}
	})
}
