package llmtest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"datachat"
)

// What a model emitted, as the suite and the provider packages' tests read
// it: an answer's events, collected from a stream, and the comparison of
// JSON texts.

// Events is a recorded answer.
type Events []datachat.ModelEvent

// Collect runs m.Stream and returns what it emitted.
func Collect(ctx context.Context, m Model, req *datachat.ModelRequest) (Events, error) {
	var evs Events
	err := m.Stream(ctx, req, func(ev datachat.ModelEvent) error {
		evs = append(evs, ev)
		return nil
	})
	return evs, err
}

// Text returns the answer's text.
func (e Events) Text() string {
	var b strings.Builder
	for _, ev := range e {
		b.WriteString(ev.Text)
	}
	return b.String()
}

// ToolCalls returns the answer's tool calls.
func (e Events) ToolCalls() []datachat.ModelToolCall {
	var out []datachat.ModelToolCall
	for _, ev := range e {
		if ev.ToolCall != nil {
			out = append(out, *ev.ToolCall)
		}
	}
	return out
}

// CheckEnd reports what is wrong with the end of a successful answer: it must
// end with one FinishReason event followed by one Usage event, with no other
// finish or usage events, and each event must set exactly one field.
func (e Events) CheckEnd() error {
	n := len(e)
	if n < 2 || e[n-2].FinishReason == "" || e[n-1].Usage == nil {
		return fmt.Errorf("the answer does not end with a finish reason then usage: %+v", e)
	}
	for i, ev := range e {
		set := 0
		for _, b := range []bool{ev.Text != "", ev.ToolCall != nil, ev.Usage != nil, ev.FinishReason != ""} {
			if b {
				set++
			}
		}
		if set != 1 {
			return fmt.Errorf("event %d sets %d fields: %+v", i, set, ev)
		}
		if i < n-2 && (ev.Usage != nil || ev.FinishReason != "") {
			return fmt.Errorf("event %d: usage or finish before the end: %+v", i, ev)
		}
	}
	return nil
}

// Finish returns the finish reason.
func (e Events) Finish() string {
	for _, ev := range e {
		if ev.FinishReason != "" {
			return ev.FinishReason
		}
	}
	return ""
}

// Usage returns the last usage event's counts.
func (e Events) Usage() *datachat.TokenCount {
	for i := len(e) - 1; i >= 0; i-- {
		if e[i].Usage != nil {
			return e[i].Usage
		}
	}
	return nil
}

// JSONEqual reports whether two JSON texts hold the same value.
func JSONEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
