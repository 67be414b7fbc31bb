package record

import (
	"testing"

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
