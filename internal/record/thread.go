package record

import (
	"time"

	"datachat"
)

// Thread puts together a conversation's messages as both stores read them:
// the messages first, then their tool calls and their parts, each attached to
// its message.
type Thread struct {
	msgs []*datachat.Message
	byID map[string]*datachat.Message
}

// NewThread starts a thread of msgs, in order.
func NewThread(msgs []*datachat.Message) *Thread {
	th := &Thread{msgs: msgs, byID: make(map[string]*datachat.Message, len(msgs))}
	for _, m := range msgs {
		th.byID[m.ID] = m
	}
	return th
}

// AddToolCall attaches tc to its message, if the thread holds it.
func (th *Thread) AddToolCall(tc datachat.ToolCall) {
	if m := th.byID[tc.MessageID]; m != nil {
		m.ToolCalls = append(m.ToolCalls, tc)
	}
}

// AddPart attaches p, the next part, to message messageID, if the thread
// holds it.
func (th *Thread) AddPart(messageID string, p datachat.Part) {
	if m := th.byID[messageID]; m != nil {
		m.Parts = append(m.Parts, p)
	}
}

// Messages returns the messages with their parts merged; a streaming
// message's Content is its text so far: what it appended since it was begun.
func (th *Thread) Messages() []*datachat.Message {
	for _, m := range th.msgs {
		if m.Parts == nil {
			continue
		}
		m.Parts = datachat.MergeParts(m.Parts)
		if m.Status == datachat.StatusStreaming {
			m.Content = datachat.PartsText(m.Parts)
		}
	}
	return th.msgs
}

// TurnMessage is a message BeginTurn inserts, with its lease: none for the
// user's message, the turn's for the assistant's.
type TurnMessage struct {
	*datachat.Message
	Lease datachat.Lease
	Until *time.Time // lease_until as stored: nil without a lease
}

// Turn returns the messages BeginTurn inserts, in order: the user's (when
// there is one), then the assistant's, leased to lease; each is given its id
// and times.
func Turn(user, assistant *datachat.Message, lease datachat.Lease) []TurnMessage {
	var turn []TurnMessage
	if user != nil {
		turn = append(turn, TurnMessage{Message: user})
	}
	turn = append(turn, TurnMessage{Message: assistant, Lease: lease, Until: TimePtr(&lease.Until)})
	for _, m := range turn {
		Fill(&m.ID, &m.CreatedAt, &m.UpdatedAt)
	}
	return turn
}

// FinishParts are the parts [datachat.Store.FinishMessage] writes for m,
// numbered from first, and whether it removes the message's stored parts
// before: all of m's parts merged, replacing what streamed; or, when the
// store holds m's first m.PartsStored parts already (the flushes'), only
// those after them, removing nothing — an answer's text is then written to
// the parts once, not a second time at its end.
func FinishParts(m *datachat.Message) (first int, parts []datachat.Part, replace bool) {
	if n := m.PartsStored; n > 0 && n <= len(m.Parts) {
		return n, m.Parts[n:], false
	}
	return 0, datachat.MergeParts(m.Parts), true
}
