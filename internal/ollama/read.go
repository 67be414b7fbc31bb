package ollama

import "datachat/internal/llm/wirejson"

// Reading stream lines with a wirejson.Reader, without reflection: one
// function per wire type, reading exactly the fields the type declares (see
// wire.go), so that [wirejson.Decode] stores what encoding/json would.

var (
	chatResponseFields = []string{"message", "done", "done_reason", "prompt_eval_count", "eval_count", "error"}
	messageFields      = []string{"role", "content", "thinking", "tool_calls", "tool_call_id", "tool_name"}
	toolCallFields     = []string{"id", "type", "function"}
	functionFields     = []string{"index", "name", "arguments"}
)

func readChatResponse(r *wirejson.Reader, c *chatResponse) {
	r.Object(chatResponseFields, func(name string) {
		switch name {
		case "message":
			wirejson.Ptr(r, &c.Message, readMessage)
		case "done":
			r.ReadBool(&c.Done)
		case "done_reason":
			r.ReadString(&c.DoneReason)
		case "prompt_eval_count":
			r.ReadInt64(&c.PromptEvalCount)
		case "eval_count":
			r.ReadInt64(&c.EvalCount)
		case "error":
			r.ReadStringPtr(&c.Error)
		}
	})
}

func readMessage(r *wirejson.Reader, m *message) {
	r.Object(messageFields, func(name string) {
		switch name {
		case "role":
			r.ReadString(&m.Role)
		case "content":
			r.ReadString(&m.Content)
		case "thinking":
			r.ReadString(&m.Thinking)
		case "tool_calls":
			wirejson.Slice(r, &m.ToolCalls, readToolCall)
		case "tool_call_id":
			r.ReadString(&m.ToolCallID)
		case "tool_name":
			r.ReadString(&m.ToolName)
		}
	})
}

func readToolCall(r *wirejson.Reader, tc *toolCall) {
	r.Object(toolCallFields, func(name string) {
		switch name {
		case "id":
			r.ReadString(&tc.ID)
		case "type":
			r.ReadString(&tc.Type)
		case "function":
			r.Object(functionFields, func(name string) {
				switch name {
				case "index":
					r.ReadIntPtr(&tc.Function.Index)
				case "name":
					r.ReadString(&tc.Function.Name)
				case "arguments":
					r.ReadRaw(&tc.Function.Arguments)
				}
			})
		}
	})
}
