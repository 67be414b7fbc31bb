package gemini

import "datachat/internal/llm/wirejson"

// Reading stream events with a wirejson.Reader, without reflection: one
// function per wire type, reading exactly the fields the type declares (see
// wire.go), so that [wirejson.Decode] stores what encoding/json would. An
// error event and a functionResponse part (which an answer never holds) are
// left to encoding/json.

var (
	responseFields     = []string{"candidates", "promptFeedback", "usageMetadata", "error"}
	candidateFields    = []string{"content", "finishReason", "index"}
	contentFields      = []string{"role", "parts"}
	partFields         = []string{"text", "thought", "thoughtSignature", "functionCall", "functionResponse"}
	functionCallFields = []string{"id", "name", "args"}
	feedbackFields     = []string{"blockReason"}
	usageFields        = []string{"promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount", "toolUsePromptTokenCount", "totalTokenCount"}
)

func readResponse(r *wirejson.Reader, g *generateResponse) {
	r.Object(responseFields, func(name string) {
		switch name {
		case "candidates":
			wirejson.Slice(r, &g.Candidates, readCandidate)
		case "promptFeedback":
			wirejson.Ptr(r, &g.PromptFeedback, func(r *wirejson.Reader, p *promptFeedback) {
				r.Object(feedbackFields, func(string) { r.ReadString(&p.BlockReason) })
			})
		case "usageMetadata":
			wirejson.Ptr(r, &g.UsageMetadata, readUsage)
		case "error":
			r.NullOnly()
			g.Error = nil
		}
	})
}

func readCandidate(r *wirejson.Reader, c *candidate) {
	r.Object(candidateFields, func(name string) {
		switch name {
		case "content":
			wirejson.Ptr(r, &c.Content, readContent)
		case "finishReason":
			r.ReadString(&c.FinishReason)
		case "index":
			r.ReadInt(&c.Index)
		}
	})
}

func readContent(r *wirejson.Reader, c *content) {
	r.Object(contentFields, func(name string) {
		switch name {
		case "role":
			r.ReadString(&c.Role)
		case "parts":
			wirejson.Slice(r, &c.Parts, readPart)
		}
	})
}

func readPart(r *wirejson.Reader, p *part) {
	r.Object(partFields, func(name string) {
		switch name {
		case "text":
			r.ReadString(&p.Text)
		case "thought":
			r.ReadBool(&p.Thought)
		case "thoughtSignature":
			r.ReadString(&p.ThoughtSignature)
		case "functionCall":
			wirejson.Ptr(r, &p.FunctionCall, readFunctionCall)
		case "functionResponse":
			r.NullOnly()
			p.FunctionResponse = nil
		}
	})
}

func readFunctionCall(r *wirejson.Reader, fc *functionCall) {
	r.Object(functionCallFields, func(name string) {
		switch name {
		case "id":
			r.ReadString(&fc.ID)
		case "name":
			r.ReadString(&fc.Name)
		case "args":
			r.ReadRaw(&fc.Args)
		}
	})
}

func readUsage(r *wirejson.Reader, u *usageMetadata) {
	r.Object(usageFields, func(name string) {
		switch name {
		case "promptTokenCount":
			r.ReadInt64(&u.PromptTokenCount)
		case "candidatesTokenCount":
			r.ReadInt64(&u.CandidatesTokenCount)
		case "thoughtsTokenCount":
			r.ReadInt64(&u.ThoughtsTokenCount)
		case "toolUsePromptTokenCount":
			r.ReadInt64(&u.ToolUsePromptTokenCount)
		case "totalTokenCount":
			r.ReadInt64(&u.TotalTokenCount)
		}
	})
}
