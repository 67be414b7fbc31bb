package ollama

import (
	"encoding/json"
	"fmt"

	"datachat"
	"datachat/internal/llm"
	"datachat/internal/llm/wirejson"
)

// decoder turns the NDJSON lines of an /api/chat answer into model events.
// Tool calls arrive whole, arguments as an object; the answer is complete only
// with the final done:true line, which carries the usage.
type decoder struct {
	newID  func() string
	calls  int
	done   bool
	finish string
	usage  *datachat.TokenCount
	reader wirejson.Reader // of lines
	last   chatResponse    // the last one read, kept here to spare an allocation each
}

// Feed decodes one line.
func (d *decoder) Feed(line []byte) ([]datachat.ModelEvent, error) {
	d.last = chatResponse{}
	r := &d.last
	if err := wirejson.Decode(&d.reader, line, r, readChatResponse); err != nil {
		return nil, llm.MalformedError(provider, fmt.Errorf("decode stream line: %w", err))
	}
	if r.Error != nil {
		return nil, mapError(0, nil, line)
	}
	var events []datachat.ModelEvent
	if m := r.Message; m != nil {
		if m.Content != "" {
			events = append(events, datachat.ModelEvent{Text: m.Content})
		}
		for _, tc := range m.ToolCalls {
			if tc.Function.Name == "" {
				return events, llm.MalformedError(provider, fmt.Errorf("tool call without a name"))
			}
			args, err := argsObject(tc.Function.Arguments)
			if err != nil {
				return events, llm.MalformedError(provider, fmt.Errorf("tool call %s: %w", tc.Function.Name, err))
			}
			id := tc.ID
			if id == "" {
				id = d.newID()
			}
			d.calls++
			events = append(events, datachat.ModelEvent{ToolCall: &datachat.ModelToolCall{ID: id, Name: tc.Function.Name, Args: args}})
		}
	}
	if r.Done {
		d.done = true
		d.finish = r.DoneReason
		d.usage = &datachat.TokenCount{Input: r.PromptEvalCount, Output: r.EvalCount}
	}
	return events, nil
}

// argsObject returns a call's arguments as a compact JSON object. Ollama sends
// an object; a JSON string holding one (the OpenAI way) is accepted too.
func argsObject(raw json.RawMessage) (json.RawMessage, error) {
	raw = llm.ObjectOrEmpty(raw)
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		raw = llm.ObjectOrEmpty(json.RawMessage(s))
	}
	args, ok := llm.ArgsObject(raw)
	if !ok {
		return nil, fmt.Errorf("arguments are not a JSON object: %.100q", raw)
	}
	return args, nil
}

// End returns the normalized finish reason, or llm.ErrIncomplete when the
// stream ended without its done:true line (a connection reset mid-answer that
// the ollama/api client would report as success).
func (d *decoder) End() ([]datachat.ModelEvent, string, error) {
	if !d.done {
		return nil, "", llm.ErrIncomplete
	}
	return nil, llm.FinishReason(d.finish, d.calls > 0, finishReasons), nil
}

// finishReasons are Ollama's done_reason values.
var finishReasons = map[string]string{"": llm.FinishStop, "stop": llm.FinishStop, "length": llm.FinishLength}

// Usage returns the usage reported so far, nil for none.
func (d *decoder) Usage() *datachat.TokenCount { return d.usage }

// Done reports that the answer's end marker was read.
func (d *decoder) Done() bool { return d.done }
