package server

import (
	"encoding/json"
	"strings"
	"testing"

	"datachat/internal/chat"
)

// FuzzAppendJSONString: the token path's string encoder writes exactly
// what encoding/json writes, for any string, valid UTF-8 or not.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", `q"uo\te`, "<a href='x'>&amp;</a>", "tab\tnl\ncr\r\b\f\x00\x1f\x7f",
		"é ü 日本 🙂", "\u2028\u2029", "bad \xff\xfe utf8 \xc3", "tok03 [ts:1700000000000000000]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
	})
}

// TestEncodeTokenEvent: a token event is encoded as json.Marshal encodes
// the other events.
func TestEncodeTokenEvent(t *testing.T) {
	ev := chat.Event{Type: chat.EventToken, Data: chat.TokenEvent{Token: "a <b> \"c\"\n"}}
	got, err := encodeEvent(ev)
	want, _ := json.Marshal(wsEvent{Type: "chat_token", Data: ev.Data})
	if err != nil || string(got) != string(want) {
		t.Errorf("got %s, %v; want %s", got, err, want)
	}
}

// TestOutbox: frames queue in order up to the bound, counted until the
// writer has sent them; one frame alone may exceed it; a push beyond it
// drops what waits, calls onOverflow once and queues nothing more.
func TestOutbox(t *testing.T) {
	o := newOutbox(10)
	overflows := 0
	o.onOverflow = func() { overflows++ }
	big := []byte(strings.Repeat("x", 25))
	o.push(big) // alone: taken, however large
	batch := o.take(nil)
	if len(batch) != 1 || len(o.ready) != 1 {
		t.Fatalf("after one large push: %d frames taken, ready %d", len(batch), len(o.ready))
	}
	<-o.ready
	o.push([]byte("abc")) // 25 in the writer's hands + 3 > 10
	if overflows != 1 {
		t.Fatalf("a push beyond the bound while a frame is being written: %d overflows, want 1", overflows)
	}
	o.push([]byte("d"))
	if overflows != 1 || len(o.take(nil)) != 0 {
		t.Errorf("after the overflow: %d overflows, frames queued", overflows)
	}

	o = newOutbox(10)
	o.onOverflow = func() { t.Error("overflow within the bound") }
	for _, s := range []string{"abcd", "efgh"} {
		o.push([]byte(s))
	}
	batch = o.take(nil)
	if len(batch) != 2 || string(batch[0]) != "abcd" || string(batch[1]) != "efgh" {
		t.Fatalf("took %q", batch)
	}
	o.sent(4)
	o.sent(4)
	o.push([]byte("0123456789")) // all sent: room for ten again
	o.close()
	o.push([]byte("x"))
	if got := o.take(nil); len(got) != 0 {
		t.Errorf("after close: %q queued", got)
	}
}
