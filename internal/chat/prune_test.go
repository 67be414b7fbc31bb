package chat

import (
	"fmt"
	"strings"
	"testing"

	"datachat"
)

// conversation builds n alternating user/assistant messages of size chars each;
// every assistant message has one tool round of toolChars.
func conversation(n, chars, toolChars int) []*datachat.Message {
	var msgs []*datachat.Message
	for i := range n {
		m := &datachat.Message{ID: fmt.Sprint(i), Role: datachat.RoleUser, Content: strings.Repeat("u", chars)}
		if i%2 == 1 {
			m.Role = datachat.RoleAssistant
			m.Content = strings.Repeat("a", chars)
			if toolChars > 0 {
				m.ToolCalls = []datachat.ToolCall{{CallID: "c" + m.ID, Tool: "execute_sql", Args: []byte(`{}`), Result: strings.Repeat("r", toolChars)}}
			}
		}
		msgs = append(msgs, m)
	}
	return msgs
}

func TestPrune(t *testing.T) {
	tests := []struct {
		name                          string
		n, chars, toolChars, sysChars int
		budget                        int
		wantKept                      int
	}{
		{"empty", 0, 10, 0, 0, 1000, 0},
		{"under 50", 10, 10, 10, 0, 1_000_000, 10},
		{"exactly 50", 50, 10, 10, 0, 1_000_000, 50},
		{"51 keeps the newest 50", 51, 10, 10, 0, 1_000_000, 50},
		{"1000 keeps 50", 1000, 10, 10, 0, 1_000_000, 50},
		// tool rounds are free against the count but not against the budget
		{"tool rounds don't count", 60, 1, 100_000, 0, 100_000_000, 50},
		// 50 messages of 400 chars = 100 tokens each; budget 1000 tokens → 10 fit
		{"budget prunes further", 100, 400, 0, 0, 1000, 10},
		{"system prompt counts in the budget", 100, 400, 0, 2000, 1000, 5},
		// the newest message always stays, even alone over budget
		{"newest always kept", 3, 100_000, 0, 0, 10, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := conversation(tt.n, tt.chars, tt.toolChars)
			got := Prune(msgs, tt.sysChars, tt.budget)
			if len(got) != tt.wantKept {
				t.Fatalf("got %d messages, want %d", len(got), tt.wantKept)
			}
			if tt.n > 0 && got[len(got)-1] != msgs[len(msgs)-1] {
				t.Errorf("newest message not kept last")
			}
			for i := 1; i < len(got); i++ {
				if got[i-1] != msgs[len(msgs)-len(got)+i-1] {
					t.Fatalf("kept messages are not the newest run in order")
				}
			}
		})
	}
}

func TestPruneToolCharsCountInBudget(t *testing.T) {
	msgs := conversation(10, 4, 4000) // assistant messages weigh 1000+ tokens each
	got := Prune(msgs, 0, 2100)
	// An assistant message weighs 4017 chars, a user one 4: two of each are
	// 8042 chars = 2010 tokens, and one more assistant message would exceed 2100.
	if len(got) != 4 {
		t.Fatalf("got %d messages, want 4", len(got))
	}
	total := 0
	for _, m := range got {
		total += messageChars(m)
	}
	if total/4 > 2100 {
		t.Errorf("kept %d tokens, over budget 2100", total/4)
	}
}

func TestDropOldest(t *testing.T) {
	msgs := conversation(30, 1, 0)
	if got := DropOldest(msgs, 10); len(got) != 20 || got[0] != msgs[10] {
		t.Errorf("drop 10 of 30: got %d starting at %s", len(got), got[0].ID)
	}
	if got := DropOldest(msgs[:5], 10); len(got) != 1 || got[0] != msgs[4] {
		t.Errorf("drop 10 of 5: got %d, want only the newest", len(got))
	}
	if got := DropOldest(nil, 10); len(got) != 0 {
		t.Errorf("drop from none: got %d", len(got))
	}
}

func TestHistoryMessagesReplaysToolRounds(t *testing.T) {
	msgs := []*datachat.Message{
		{Role: datachat.RoleUser, Content: "how many?"},
		{Role: datachat.RoleAssistant, Content: "42.", ToolCalls: []datachat.ToolCall{
			{CallID: "a", Tool: "execute_sql", Args: []byte(`{"query":"SELECT 42"}`), Result: "42"},
		}},
		{Role: datachat.RoleAssistant, Status: datachat.StatusError}, // nothing to replay
		{Role: datachat.RoleUser, Content: "thanks"},
	}
	got := historyMessages(msgs)
	roles := make([]string, len(got))
	for i, m := range got {
		roles[i] = m.Role
	}
	if want := "user assistant tool assistant user"; strings.Join(roles, " ") != want {
		t.Fatalf("got roles %v, want %s", roles, want)
	}
	if got[1].ToolCalls[0].ID != "a" || got[2].ToolCallID != "a" || got[2].ToolName != "execute_sql" || got[2].Content != "42" {
		t.Errorf("tool round: got %+v %+v", got[1], got[2])
	}
}
