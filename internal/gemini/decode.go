package gemini

import (
	"bytes"
	"fmt"

	"datachat"
	"datachat/internal/llm"
	"datachat/internal/llm/wirejson"
)

// decoder turns the events of a streamGenerateContent answer into model events.
// Gemini repeats usageMetadata on every event with growing counts: the last
// one is the answer's usage.
type decoder struct {
	newID  func() string
	calls  int
	finish string               // Gemini's finishReason or promptFeedback.blockReason
	usage  *datachat.TokenCount // &count once an event reported usage
	count  datachat.TokenCount
	reader wirejson.Reader  // of events
	last   generateResponse // the last one read, kept here to spare an allocation each
}

// Feed decodes one SSE data field.
func (d *decoder) Feed(data []byte) ([]datachat.ModelEvent, error) {
	if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
		return nil, nil
	}
	d.last = generateResponse{}
	r := &d.last
	if err := wirejson.Decode(&d.reader, data, r, readResponse); err != nil {
		return nil, llm.MalformedError(provider, fmt.Errorf("decode stream event: %w", err))
	}
	if r.Error != nil {
		return nil, mapError(0, nil, data)
	}
	if u := r.UsageMetadata; u != nil {
		d.count = datachat.TokenCount{Input: u.PromptTokenCount, Output: u.CandidatesTokenCount + u.ThoughtsTokenCount}
		d.usage = &d.count
	}
	if r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" && len(r.Candidates) == 0 {
		d.finish = "SAFETY"
	}
	var events []datachat.ModelEvent
	for _, c := range r.Candidates {
		if c.Index != 0 {
			continue
		}
		if c.Content != nil {
			for _, p := range c.Content.Parts {
				switch {
				case p.FunctionCall != nil:
					if p.FunctionCall.Name == "" {
						return events, llm.MalformedError(provider, fmt.Errorf("function call without a name"))
					}
					args, ok := llm.ArgsObject(p.FunctionCall.Args)
					if !ok {
						return events, llm.MalformedError(provider, fmt.Errorf("function call %s: args are not a JSON object", p.FunctionCall.Name))
					}
					id := p.FunctionCall.ID
					if id == "" {
						id = d.newID()
					}
					d.calls++
					events = append(events, datachat.ModelEvent{ToolCall: &datachat.ModelToolCall{
						ID: id, Name: p.FunctionCall.Name, Args: args, Signature: p.ThoughtSignature,
					}})
				case p.Thought:
					// Thought summaries are not part of the answer.
				case p.Text != "":
					events = append(events, datachat.ModelEvent{Text: p.Text})
				}
			}
		}
		if c.FinishReason != "" {
			d.finish = c.FinishReason
		}
	}
	return events, nil
}

// End returns the normalized finish reason, or llm.ErrIncomplete when the stream
// ended without one (Gemini has no end marker but the finishReason).
func (d *decoder) End() ([]datachat.ModelEvent, string, error) {
	if d.finish == "" {
		return nil, "", llm.ErrIncomplete
	}
	return nil, llm.FinishReason(d.finish, d.finish == "STOP" && d.calls > 0, finishReasons), nil
}

// finishReasons are Gemini's finishReason values (and SAFETY for a prompt
// it blocked).
var finishReasons = map[string]string{
	"STOP": llm.FinishStop, "MAX_TOKENS": llm.FinishLength,
	"SAFETY": llm.FinishContentFilter, "RECITATION": llm.FinishContentFilter, "BLOCKLIST": llm.FinishContentFilter,
	"PROHIBITED_CONTENT": llm.FinishContentFilter, "SPII": llm.FinishContentFilter, "IMAGE_SAFETY": llm.FinishContentFilter,
}

// Usage returns the usage reported so far, nil for none.
func (d *decoder) Usage() *datachat.TokenCount { return d.usage }

// Done is always false: Gemini's answer ends with its stream, not a marker.
func (d *decoder) Done() bool { return false }
