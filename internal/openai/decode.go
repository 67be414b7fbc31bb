package openai

import (
	"bytes"
	"fmt"
	"strings"

	"datachat"
	"datachat/internal/llm"
	"datachat/internal/llm/wirejson"
)

// decoder turns the chunks of a streamed chat completion into model events.
// Text deltas pass straight through; a tool call's id and name come in its
// first delta and its arguments in fragments after it, keyed by index, so calls
// are assembled and emitted, in order, when the choice finishes.
type decoder struct {
	newID   func() string // for calls that arrive without an id
	calls   []*pendingCall
	byIndex map[int]*pendingCall
	emitted int // tool calls emitted
	finish  string
	done    bool // [DONE] seen
	usage   *datachat.TokenCount
	reader  wirejson.Reader // of chunks
	last    chunk           // the last one read, kept here to spare an allocation each
}

type pendingCall struct {
	id, name string
	args     strings.Builder
}

// Feed decodes one SSE data field.
func (d *decoder) Feed(data []byte) ([]datachat.ModelEvent, error) {
	if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
		d.done = true
		return d.flush()
	}
	d.last = chunk{}
	c := &d.last
	if err := wirejson.Decode(&d.reader, data, c, readChunk); err != nil {
		return nil, llm.MalformedError(provider, fmt.Errorf("decode stream chunk: %w", err))
	}
	if len(c.Error) > 0 && !bytes.Equal(c.Error, []byte("null")) {
		return nil, mapError(0, nil, data)
	}
	if c.Usage != nil {
		d.usage = &datachat.TokenCount{Input: c.Usage.PromptTokens, Output: c.Usage.CompletionTokens}
	}
	var events []datachat.ModelEvent
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		if s := ch.Delta.Content; s != nil && *s != "" {
			events = append(events, datachat.ModelEvent{Text: *s})
		}
		if s := ch.Delta.Refusal; s != nil && *s != "" {
			events = append(events, datachat.ModelEvent{Text: *s})
		}
		for _, tc := range ch.Delta.ToolCalls {
			d.add(tc)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			d.finish = *ch.FinishReason
			calls, err := d.flush()
			events = append(events, calls...)
			if err != nil {
				return events, err
			}
		}
	}
	return events, nil
}

// add merges one tool call fragment. A fragment without an index continues the
// last call, unless it opens a new one (an id different from the last call's).
func (d *decoder) add(tc toolCallDelta) {
	if d.byIndex == nil {
		d.byIndex = map[int]*pendingCall{}
	}
	var pc *pendingCall
	if tc.Index != nil {
		pc = d.byIndex[*tc.Index]
		if pc != nil && tc.ID != "" && pc.id != "" && tc.ID != pc.id {
			pc = nil // some servers reuse index 0 for every call
		}
	} else if n := len(d.calls); n > 0 && (tc.ID == "" || tc.ID == d.calls[n-1].id) {
		pc = d.calls[n-1]
	}
	if pc == nil {
		pc = &pendingCall{}
		d.calls = append(d.calls, pc)
		if tc.Index != nil {
			d.byIndex[*tc.Index] = pc
		}
	}
	if tc.ID != "" {
		pc.id = tc.ID
	}
	if tc.Function.Name != "" {
		pc.name = tc.Function.Name
	}
	pc.args.WriteString(tc.Function.Arguments)
}

// flush emits the assembled tool calls.
func (d *decoder) flush() ([]datachat.ModelEvent, error) {
	var events []datachat.ModelEvent
	for _, pc := range d.calls {
		if pc.name == "" {
			return events, llm.MalformedError(provider, fmt.Errorf("tool call %q without a name", pc.id))
		}
		args, ok := llm.ArgsObject([]byte(pc.args.String()))
		if !ok {
			return events, llm.MalformedError(provider, fmt.Errorf("tool call %s: arguments are not a JSON object: %q", pc.name, pc.args.String()))
		}
		id := pc.id
		if id == "" {
			id = d.newID()
		}
		d.emitted++
		events = append(events, datachat.ModelEvent{ToolCall: &datachat.ModelToolCall{ID: id, Name: pc.name, Args: args}})
	}
	d.calls = nil
	d.byIndex = nil
	return events, nil
}

// End returns the normalized finish reason, or llm.ErrIncomplete when the
// stream ended with neither a finish_reason nor [DONE].
func (d *decoder) End() ([]datachat.ModelEvent, string, error) {
	if d.finish == "" && !d.done {
		return nil, "", llm.ErrIncomplete
	}
	events, err := d.flush()
	if err != nil {
		return events, "", err
	}
	return events, llm.FinishReason(d.finish, d.emitted > 0, finishReasons), nil
}

// finishReasons are the finish_reason values of OpenAI and compatible servers
// (vLLM's eos, Anthropic's end_turn); none, with [DONE], is a stop.
var finishReasons = map[string]string{
	"": llm.FinishStop, "stop": llm.FinishStop, "eos": llm.FinishStop, "end_turn": llm.FinishStop,
	"tool_calls": llm.FinishToolCalls, "function_call": llm.FinishToolCalls,
	"length": llm.FinishLength, "content_filter": llm.FinishContentFilter,
}

// Usage returns the usage reported so far, nil for none.
func (d *decoder) Usage() *datachat.TokenCount { return d.usage }

// Done reports that the answer's end marker was read.
func (d *decoder) Done() bool { return d.done }
