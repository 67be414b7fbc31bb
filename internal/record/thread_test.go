package record

import (
	"testing"
	"time"

	"datachat"
)

func TestThread(t *testing.T) {
	done := &datachat.Message{ID: "a", Status: datachat.StatusComplete, Content: "kept"}
	streaming := &datachat.Message{ID: "b", Status: datachat.StatusStreaming, Content: "old"}
	th := NewThread([]*datachat.Message{done, streaming})
	th.AddToolCall(datachat.ToolCall{MessageID: "a", Seq: 1})
	th.AddToolCall(datachat.ToolCall{MessageID: "gone", Seq: 2})
	th.AddPart("b", datachat.Part{Type: "text", Text: "new "})
	th.AddPart("b", datachat.Part{Type: "text", Text: "text"})
	th.AddPart("gone", datachat.Part{Type: "text", Text: "x"})
	msgs := th.Messages()
	if len(msgs) != 2 || msgs[0] != done || msgs[1] != streaming {
		t.Fatalf("Messages: got %v, want the thread's two messages in order", msgs)
	}
	if len(done.ToolCalls) != 1 || done.ToolCalls[0].Seq != 1 {
		t.Errorf("tool calls of a: got %+v, want the one of seq 1", done.ToolCalls)
	}
	if done.Content != "kept" || done.Parts != nil {
		t.Errorf("a: got content %q, parts %v, want kept and none", done.Content, done.Parts)
	}
	if streaming.Content != "new text" || len(streaming.Parts) != 1 {
		t.Errorf("b: got content %q, parts %v, want \"new text\" from one merged part", streaming.Content, streaming.Parts)
	}
}

func TestFillDBSource(t *testing.T) {
	s := &datachat.DBSource{Name: "n", SealedURL: "sealed"}
	tables, users, err := FillDBSource(s)
	if err != nil {
		t.Fatalf("FillDBSource: %v", err)
	}
	if tables != "[]" || users != "[]" || s.Origin != datachat.OriginCLI {
		t.Errorf("got tables %s, users %s, origin %q, want [], [] and %q", tables, users, s.Origin, datachat.OriginCLI)
	}
	if _, _, err := FillDBSource(&datachat.DBSource{Name: "n"}); datachat.ErrorCode(err) != datachat.EINVALID {
		t.Errorf("without a sealed URL: got %v, want EINVALID", err)
	}
}

func TestListJSON(t *testing.T) {
	if v, err := ListJSON([]string(nil)); v != nil || err != nil {
		t.Errorf("ListJSON(nil): got %v, %v, want nil, nil", v, err)
	}
	if v, err := ListJSON([]string{"a"}); v != `["a"]` || err != nil {
		t.Errorf(`ListJSON([a]): got %v, %v, want ["a"], nil`, v, err)
	}
}

func TestTurn(t *testing.T) {
	until := time.Date(2026, 1, 2, 3, 4, 5, 6789, time.UTC)
	lease := datachat.Lease{Owner: "o", Node: "n", Until: until}
	user := &datachat.Message{Role: "user"}
	assistant := &datachat.Message{Role: "assistant"}
	turn := Turn(user, assistant, lease)
	if len(turn) != 2 || turn[0].Message != user || turn[1].Message != assistant {
		t.Fatalf("Turn: got %+v, want the user's message then the assistant's", turn)
	}
	if turn[0].Lease != (datachat.Lease{}) || turn[0].Until != nil {
		t.Errorf("user's lease: got %+v, %v, want none", turn[0].Lease, turn[0].Until)
	}
	if turn[1].Lease != lease || turn[1].Until == nil || !turn[1].Until.Equal(Time(until)) {
		t.Errorf("assistant's lease: got %+v, %v, want %+v until %v", turn[1].Lease, turn[1].Until, lease, Time(until))
	}
	for _, m := range turn {
		if m.ID == "" || m.CreatedAt.IsZero() || m.UpdatedAt != m.CreatedAt {
			t.Errorf("%s message: got id %q, times %v and %v, want an id and equal times", m.Role, m.ID, m.CreatedAt, m.UpdatedAt)
		}
	}
	if turn := Turn(nil, assistant, lease); len(turn) != 1 || turn[0].Message != assistant {
		t.Errorf("Turn without a user message: got %+v, want the assistant's alone", turn)
	}
}
