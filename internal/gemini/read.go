package gemini

import "datachat/internal/llm/wirejson"

// Reading stream events without reflection: one function per wire type,
// naming exactly the fields the type declares (see wire.go), so that
// [wirejson.Decode] stores what encoding/json would. An error event and a
// functionResponse part (which an answer never holds) are left to
// encoding/json.

func readResponse(r *wirejson.Reader, g *generateResponse) {
	r.Object(
		wirejson.Slice("candidates", &g.Candidates, readCandidate),
		wirejson.Ptr("promptFeedback", &g.PromptFeedback, readPromptFeedback),
		wirejson.Ptr("usageMetadata", &g.UsageMetadata, readUsage),
		wirejson.Unsupported("error"),
	)
}

func readCandidate(r *wirejson.Reader, c *candidate) {
	r.Object(
		wirejson.Ptr("content", &c.Content, readContent),
		wirejson.String("finishReason", &c.FinishReason),
		wirejson.Int("index", &c.Index),
	)
}

func readContent(r *wirejson.Reader, c *content) {
	r.Object(
		wirejson.String("role", &c.Role),
		wirejson.Slice("parts", &c.Parts, readPart),
	)
}

func readPart(r *wirejson.Reader, p *part) {
	r.Object(
		wirejson.String("text", &p.Text),
		wirejson.Bool("thought", &p.Thought),
		wirejson.String("thoughtSignature", &p.ThoughtSignature),
		wirejson.Ptr("functionCall", &p.FunctionCall, readFunctionCall),
		wirejson.Unsupported("functionResponse"),
	)
}

func readFunctionCall(r *wirejson.Reader, fc *functionCall) {
	r.Object(
		wirejson.String("id", &fc.ID),
		wirejson.String("name", &fc.Name),
		wirejson.Raw("args", &fc.Args),
	)
}

func readPromptFeedback(r *wirejson.Reader, p *promptFeedback) {
	r.Object(wirejson.String("blockReason", &p.BlockReason))
}

func readUsage(r *wirejson.Reader, u *usageMetadata) {
	r.Object(
		wirejson.Int64("promptTokenCount", &u.PromptTokenCount),
		wirejson.Int64("candidatesTokenCount", &u.CandidatesTokenCount),
		wirejson.Int64("thoughtsTokenCount", &u.ThoughtsTokenCount),
		wirejson.Int64("toolUsePromptTokenCount", &u.ToolUsePromptTokenCount),
		wirejson.Int64("totalTokenCount", &u.TotalTokenCount),
	)
}
