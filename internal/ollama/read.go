package ollama

import "datachat/internal/llm/wirejson"

// Reading stream lines without reflection: one function per wire type,
// naming exactly the fields the type declares (see wire.go), so that
// [wirejson.Decode] stores what encoding/json would.

func readChatResponse(r *wirejson.Reader, c *chatResponse) {
	r.Object(
		wirejson.Ptr("message", &c.Message, readMessage),
		wirejson.Bool("done", &c.Done),
		wirejson.String("done_reason", &c.DoneReason),
		wirejson.Int64("prompt_eval_count", &c.PromptEvalCount),
		wirejson.Int64("eval_count", &c.EvalCount),
		wirejson.StringPtr("error", &c.Error),
	)
}

func readMessage(r *wirejson.Reader, m *message) {
	r.Object(
		wirejson.String("role", &m.Role),
		wirejson.String("content", &m.Content),
		wirejson.String("thinking", &m.Thinking),
		wirejson.Slice("tool_calls", &m.ToolCalls, readToolCall),
		wirejson.String("tool_call_id", &m.ToolCallID),
		wirejson.String("tool_name", &m.ToolName),
	)
}

func readToolCall(r *wirejson.Reader, tc *toolCall) {
	r.Object(
		wirejson.String("id", &tc.ID),
		wirejson.String("type", &tc.Type),
		wirejson.Struct("function", &tc.Function, readToolCallFunction),
	)
}

func readToolCallFunction(r *wirejson.Reader, f *toolCallFunction) {
	r.Object(
		wirejson.IntPtr("index", &f.Index),
		wirejson.String("name", &f.Name),
		wirejson.Raw("arguments", &f.Arguments),
	)
}
