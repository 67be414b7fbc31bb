package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"datachat"
	"datachat/internal/sqlite/sqlitetest"
)

// Turn assembly cost (BENCHMARKS.md, "Turn assembly"): what a turn does
// before its first model call on a long conversation — the system prompt with
// datasets and excerpts, pruning, and the model request with the history
// replayed, tool rounds included.
//
//	go test -run '^$' -bench . -benchmem ./internal/chat

// benchData is a conversation's data as the prompt sees it: five datasets of
// twelve columns with samples, and documents whose search returns excerpts.
type benchData struct {
	wordRanker
	datasets []*datachat.Dataset
	sources  []datachat.Source
}

func newBenchData() benchData {
	var d benchData
	for i := range 5 {
		ds := &datachat.Dataset{ID: fmt.Sprint("d", i), Name: fmt.Sprintf("sales_%d", i), Source: fmt.Sprintf("sales_%d.parquet", i), RowCount: 1_000_000}
		for j := range 12 {
			ds.Columns = append(ds.Columns, datachat.Column{
				Name: fmt.Sprintf("Column %d", j), Type: "text", SQLType: "VARCHAR",
				Samples: []string{"north", "south", "east"},
			})
		}
		d.datasets = append(d.datasets, ds)
	}
	for i := range 5 {
		d.sources = append(d.sources, datachat.Source{
			ID: fmt.Sprint("s", i), Text: strings.Repeat("Revenue grew in the northern region. ", 25),
			Metadata: map[string]any{"document": "report.pdf", "page": i + 1},
		})
	}
	return d
}

func (d benchData) Datasets(context.Context, string) ([]*datachat.Dataset, error) {
	return d.datasets, nil
}
func (d benchData) Query(context.Context, string, string) (*datachat.QueryResult, error) {
	return nil, datachat.Errorf(datachat.EINVALID, "not in a benchmark")
}
func (d benchData) EstimateRows(context.Context, string, string) (int64, error) { return 0, nil }
func (d benchData) LoadURL(context.Context, string, string, string) ([]*datachat.Dataset, error) {
	return nil, datachat.Errorf(datachat.EINVALID, "not in a benchmark")
}
func (d benchData) HasDocuments(context.Context, string) (bool, error) { return true, nil }
func (d benchData) SaveQuery(context.Context, string, string, string, func(context.Context, datachat.RowSink) (datachat.StreamResult, error)) (*datachat.Dataset, datachat.StreamResult, error) {
	return nil, datachat.StreamResult{}, datachat.Errorf(datachat.EINVALID, "not in a benchmark")
}
func (d benchData) Search(_ context.Context, _ string, q datachat.SearchQuery) (*datachat.SearchResult, error) {
	return &datachat.SearchResult{Sources: d.sources[:min(q.TopK, len(d.sources))]}, nil
}

// longConversation returns n messages alternating user and assistant; every
// assistant message has two tool rounds (an execute_sql with a result table
// and a search_documents), as an analysis conversation does.
func longConversation(n int) []*datachat.Message {
	msgs := make([]*datachat.Message, 0, n)
	result := strings.Repeat("region | revenue\nnorth | 1234.5\n", 60) // ~2 KB
	for i := range n {
		id := fmt.Sprint("m", i)
		if i%2 == 0 {
			msgs = append(msgs, &datachat.Message{ID: id, Role: datachat.RoleUser, Status: datachat.StatusComplete,
				Content: fmt.Sprintf("Question %d: what was the revenue by region for the last quarter, and how does it compare?", i)})
			continue
		}
		msgs = append(msgs, &datachat.Message{ID: id, Role: datachat.RoleAssistant, Status: datachat.StatusComplete,
			Content: strings.Repeat("The northern region led with 1,234.5 in revenue. ", 20), // ~1 KB
			ToolCalls: []datachat.ToolCall{
				{ID: id + "a", MessageID: id, Seq: 1, CallID: "call_" + id + "a", Tool: datachat.ToolExecuteSQL, OK: true,
					Args: json.RawMessage(`{"query":"SELECT region, sum(revenue) AS revenue FROM sales_0 GROUP BY ALL ORDER BY 2 DESC LIMIT 1000"}`), Result: result},
				{ID: id + "b", MessageID: id, Seq: 2, CallID: "call_" + id + "b", Tool: datachat.ToolSearchDocuments, OK: true,
					Args: json.RawMessage(`{"query":"regional revenue"}`), Result: strings.Repeat("[1] report.pdf, page 2: revenue grew. ", 10)},
			}})
	}
	return msgs
}

// assemble does what Send does between loading the history and the first
// model call.
func assemble(ctx context.Context, r *Runner, history []*datachat.Message) (*datachat.ModelRequest, error) {
	t := &turn{r: r, conv: &datachat.Conversation{ID: "c"}, history: history}
	if err := t.prepare(ctx, "And by product category?"); err != nil {
		return nil, err
	}
	return t.request(ctx), nil
}

func BenchmarkTurnAssembly(b *testing.B) {
	history := longConversation(10_000)
	for _, window := range []int{1_048_576, 128_000, 16_000} {
		b.Run(fmt.Sprintf("window=%d", window), func(b *testing.B) {
			r := &Runner{Data: newBenchData(), ModelID: "m", Window: window, MaxContextDocs: 5, MaxOutputTokens: 2048, Temperature: 0.7}
			req, err := assemble(b.Context(), r, history)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := assemble(b.Context(), r, history); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(req.Messages)), "model-messages")
		})
	}
}

// TestTurnAssemblyBudget checks the benchmark's target, 5 ms per turn on a
// 10,000-message conversation, with room for a loaded machine, and that the
// result is pruned as Prune's rule says.
func TestTurnAssemblyBudget(t *testing.T) {
	history := longConversation(10_000)
	r := &Runner{Data: newBenchData(), ModelID: "m", Window: 128_000, MaxContextDocs: 5, MaxOutputTokens: 2048}
	req, err := assemble(t.Context(), r, history)
	if err != nil {
		t.Fatal(err)
	}
	users := 0
	for _, m := range req.Messages {
		if m.Role == datachat.ModelRoleUser {
			users++
		}
	}
	if users != MaxContextMessages/2 || !strings.Contains(req.System, "sales_4") || !strings.Contains(req.System, "[5] report.pdf, page 5") {
		t.Errorf("assembled request: %d user messages, system prompt %d chars; want %d and every dataset and excerpt", users, len(req.System), MaxContextMessages/2)
	}
	res := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			assemble(context.Background(), r, history)
		}
	})
	if per := time.Duration(res.NsPerOp()); per > 25*time.Millisecond {
		t.Errorf("turn assembly takes %s, want well under 5 ms", per)
	}
}

// BenchmarkLoadHistory measures what precedes assembly on every turn: reading
// history from SQLite in a conversation of 10,000 messages and 10,000 tool
// rounds — all of it (the page reopening a conversation) and the newest 49
// (what a turn reads, since it sends at most 50 with the new question).
func BenchmarkLoadHistory(b *testing.B) {
	ctx := b.Context()
	st := sqlitetest.Open(b)
	_, conv := sqlitetest.Conversation(b, st, "bench")
	for _, m := range longConversation(10_000) {
		calls := m.ToolCalls
		m.ID, m.ConversationID, m.ToolCalls = "", conv.ID, nil
		if err := st.CreateMessage(ctx, m); err != nil {
			b.Fatal(err)
		}
		for _, tc := range calls {
			tc.ID, tc.MessageID = "", m.ID
			if err := st.CreateToolCall(ctx, &tc); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	b.Run("all", func(b *testing.B) {
		for b.Loop() {
			msgs, err := st.Messages(ctx, conv.ID)
			if err != nil || len(msgs) != 10_000 {
				b.Fatalf("Messages: %d, %v", len(msgs), err)
			}
		}
	})
	b.Run("turn", func(b *testing.B) {
		for b.Loop() {
			msgs, err := st.RecentMessages(ctx, conv.ID, MaxContextMessages-1)
			if err != nil || len(msgs) != MaxContextMessages-1 {
				b.Fatalf("RecentMessages: %d, %v", len(msgs), err)
			}
		}
	})
}
