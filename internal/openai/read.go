package openai

import "datachat/internal/llm/wirejson"

// Reading stream chunks with a wirejson.Reader, without reflection: one
// function per wire type, reading exactly the fields the type declares (see
// wire.go), so that [wirejson.Decode] stores what encoding/json would.

var (
	chunkFields         = []string{"choices", "usage", "error"}
	choiceFields        = []string{"index", "delta", "finish_reason"}
	deltaFields         = []string{"content", "refusal", "tool_calls"}
	toolCallDeltaFields = []string{"index", "id", "type", "function"}
	functionFields      = []string{"name", "arguments"}
	usageFields         = []string{"prompt_tokens", "completion_tokens", "total_tokens"}
)

func readChunk(r *wirejson.Reader, c *chunk) {
	r.Object(chunkFields, func(name string) {
		switch name {
		case "choices":
			wirejson.Slice(r, &c.Choices, readChoice)
		case "usage":
			wirejson.Ptr(r, &c.Usage, readUsage)
		case "error":
			r.ReadRaw(&c.Error)
		}
	})
}

func readChoice(r *wirejson.Reader, c *choice) {
	r.Object(choiceFields, func(name string) {
		switch name {
		case "index":
			r.ReadInt(&c.Index)
		case "delta":
			readDelta(r, &c.Delta)
		case "finish_reason":
			r.ReadStringPtr(&c.FinishReason)
		}
	})
}

func readDelta(r *wirejson.Reader, d *delta) {
	r.Object(deltaFields, func(name string) {
		switch name {
		case "content":
			r.ReadStringPtr(&d.Content)
		case "refusal":
			r.ReadStringPtr(&d.Refusal)
		case "tool_calls":
			wirejson.Slice(r, &d.ToolCalls, readToolCallDelta)
		}
	})
}

func readToolCallDelta(r *wirejson.Reader, tc *toolCallDelta) {
	r.Object(toolCallDeltaFields, func(name string) {
		switch name {
		case "index":
			r.ReadIntPtr(&tc.Index)
		case "id":
			r.ReadString(&tc.ID)
		case "type":
			r.ReadString(&tc.Type)
		case "function":
			r.Object(functionFields, func(name string) {
				switch name {
				case "name":
					r.ReadString(&tc.Function.Name)
				case "arguments":
					r.ReadString(&tc.Function.Arguments)
				}
			})
		}
	})
}

func readUsage(r *wirejson.Reader, u *usage) {
	r.Object(usageFields, func(name string) {
		switch name {
		case "prompt_tokens":
			r.ReadInt64(&u.PromptTokens)
		case "completion_tokens":
			r.ReadInt64(&u.CompletionTokens)
		case "total_tokens":
			r.ReadInt64(&u.TotalTokens)
		}
	})
}
