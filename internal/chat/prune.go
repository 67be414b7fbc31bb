package chat

import (
	"datachat"
)

// MaxContextMessages is how many user and assistant messages a turn sends at
// most. Tool rounds ride free with their assistant message.
const MaxContextMessages = 50

// Prune selects the history a turn sends to the model, like this: walk back from the newest message keeping up to MaxContextMessages user
// and assistant messages (each assistant message with its tool rounds, which do
// not count), then, while the estimate of everything sent (system prompt
// included, chars/4) is over budgetTokens, drop the oldest kept message. The
// newest message, the user's question, is always kept. msgs must be in
// creation order; the result is too.
func Prune(msgs []*datachat.Message, systemChars, budgetTokens int) []*datachat.Message {
	start := max(0, len(msgs)-MaxContextMessages)
	kept := msgs[start:]
	total := systemChars
	for _, m := range kept {
		total += messageChars(m)
	}
	for len(kept) > 1 && total/4 > budgetTokens {
		total -= messageChars(kept[0])
		kept = kept[1:]
	}
	return kept
}

// DropOldest drops the n oldest messages, each with its tool rounds, keeping at
// least the newest one: the retry after a context-too-large answer.
func DropOldest(msgs []*datachat.Message, n int) []*datachat.Message {
	n = min(n, len(msgs)-1)
	if n <= 0 {
		return msgs
	}
	return msgs[n:]
}

// messageChars is a message's size for the chars/4 estimate: its text and
// every tool round's arguments and result.
func messageChars(m *datachat.Message) int {
	n := len(m.Content)
	for _, tc := range m.ToolCalls {
		n += len(tc.Tool) + len(tc.Args) + len(tc.Result) + len(tc.Error)
	}
	return n
}

// EstimateTokens is the chars/4 estimate used when a provider reports no usage.
func EstimateTokens(chars int) int64 {
	return int64((chars + 3) / 4)
}

// historyMessages turns stored messages into model messages. An assistant
// message replays each of its tool rounds as a call and its result, then its
// text. Messages that carry nothing (an assistant message that failed before
// any text) are left out.
func historyMessages(msgs []*datachat.Message) []datachat.ModelMessage {
	out := make([]datachat.ModelMessage, 0, len(msgs))
	for _, m := range msgs {
		if m.Role == datachat.RoleUser {
			out = append(out, datachat.ModelMessage{Role: datachat.ModelRoleUser, Content: m.Content})
			continue
		}
		for _, tc := range m.ToolCalls {
			out = append(out,
				datachat.ModelMessage{Role: datachat.ModelRoleAssistant, ToolCalls: []datachat.ModelToolCall{{ID: tc.CallID, Name: tc.Tool, Args: tc.Args}}},
				datachat.ModelMessage{Role: datachat.ModelRoleTool, ToolCallID: tc.CallID, ToolName: tc.Tool, Content: tc.Result},
			)
		}
		if m.Content != "" {
			out = append(out, datachat.ModelMessage{Role: datachat.ModelRoleAssistant, Content: m.Content})
		}
	}
	return out
}
