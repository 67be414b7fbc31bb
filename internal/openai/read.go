package openai

import "datachat/internal/llm/wirejson"

// Reading stream chunks without reflection: one function per wire type,
// naming exactly the fields the type declares (see wire.go), so that
// [wirejson.Decode] stores what encoding/json would.

func readChunk(r *wirejson.Reader, c *chunk) {
	r.Object(
		wirejson.Slice("choices", &c.Choices, readChoice),
		wirejson.Ptr("usage", &c.Usage, readUsage),
		wirejson.Raw("error", &c.Error),
	)
}

func readChoice(r *wirejson.Reader, c *choice) {
	r.Object(
		wirejson.Int("index", &c.Index),
		wirejson.Struct("delta", &c.Delta, readDelta),
		wirejson.StringPtr("finish_reason", &c.FinishReason),
	)
}

func readDelta(r *wirejson.Reader, d *delta) {
	r.Object(
		wirejson.StringPtr("content", &d.Content),
		wirejson.StringPtr("refusal", &d.Refusal),
		wirejson.Slice("tool_calls", &d.ToolCalls, readToolCallDelta),
	)
}

func readToolCallDelta(r *wirejson.Reader, tc *toolCallDelta) {
	r.Object(
		wirejson.IntPtr("index", &tc.Index),
		wirejson.String("id", &tc.ID),
		wirejson.String("type", &tc.Type),
		wirejson.Struct("function", &tc.Function, readFunctionDelta),
	)
}

func readFunctionDelta(r *wirejson.Reader, f *functionDelta) {
	r.Object(
		wirejson.String("name", &f.Name),
		wirejson.String("arguments", &f.Arguments),
	)
}

func readUsage(r *wirejson.Reader, u *usage) {
	r.Object(
		wirejson.Int64("prompt_tokens", &u.PromptTokens),
		wirejson.Int64("completion_tokens", &u.CompletionTokens),
		wirejson.Int64("total_tokens", &u.TotalTokens),
	)
}
